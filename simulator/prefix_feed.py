"""The fleet's prefix caches reaching the Proxy: ``POST /v1/instance/prefix_blocks`` as the agents send it.

Every ``PUBLISH_EVERY_S`` (250 ms, SPEC 15.2), each engine of the fleet with
changes sends them (``PrefixPublisher``'s bodies, in order, one request at a
time per engine, stopping at the first that is not taken); its first send is
its whole set as a reset, and so is the next after the Proxy answers
``resync`` or ``unknown_instance`` or a send fails. The feed speaks with the
fleet's token (scope ``instance``). A Proxy without the endpoint (404 or
405) is noted once and the feed stops: placement then knows no caches.
"""

from __future__ import annotations

import asyncio

import aiohttp
import orjson

from simulator.engines import ENGINE_URL
from simulator.prefix_cache import PUBLISH_EVERY_S, PrefixPublisher

PREFIX_BLOCKS_PATH = "/v1/instance/prefix_blocks"
MISSING = (404, 405)


def engine_name(engine, rank):
    """What the feed calls one engine of a host (15.3's ``engine``): its URL, and its rank when it has two."""
    return ENGINE_URL if len(engine.ranks) == 1 else f"{ENGINE_URL}#{rank.index}"


class PrefixFeed:
    """The prefix-block updates of one policy's fleet (``hosts``: ``{instance_id: SimulatedHost}``)."""

    def __init__(self, session, base_url, hosts, epoch=0):
        self.session = session
        self.url = base_url + PREFIX_BLOCKS_PATH
        self.publishers = [
            PrefixPublisher(instance_id, engine_name(host.engine, rank), rank.cache, epoch)
            for instance_id, host in hosts.items() if host.engine.publishes
            for rank in host.engine.ranks]
        self.posts = 0
        self.failures = {}  # kind -> count: http_<status>, unknown_instance, connection_error
        self.missing = False  # the Proxy has no such endpoint

    def stats(self):
        return {"posts": self.posts, "failures": dict(self.failures), "endpoint_missing": self.missing,
                "resets": sum(p.resets for p in self.publishers), "resyncs": sum(p.resyncs for p in self.publishers)}

    async def run(self):
        """Until cancelled: every engine's changes, every ``PUBLISH_EVERY_S``."""
        while not self.missing:
            await asyncio.gather(*(self._send(publisher) for publisher in self.publishers))
            await asyncio.sleep(PUBLISH_EVERY_S)

    async def flush(self):
        """One round now (what is left when the traffic ends; tests)."""
        await asyncio.gather(*(self._send(publisher) for publisher in self.publishers))

    async def _send(self, publisher):
        for body in publisher.bodies():
            if self.missing:
                return
            status, data = await self._post(body)
            self.posts += 1
            if status in MISSING:
                self.missing = True
                return
            if not publisher.answered(status, data):
                kind = ("unknown_instance" if isinstance(data, dict) and data.get("error") == "unknown_instance"
                        else "connection_error" if status is None else f"http_{status}")
                self.failures[kind] = self.failures.get(kind, 0) + 1
                return  # the rest would be a seq gap: the next round sends the whole set

    async def _post(self, body):
        try:
            async with self.session.post(self.url, data=orjson.dumps(body)) as response:
                raw = await response.read()
                status = response.status
        except (aiohttp.ClientError, TimeoutError):
            return None, None
        try:
            return status, orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            return status, None

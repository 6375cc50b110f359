"""One policy's router in the routing benchmark: where each request goes, what it hears back.

The client-side policies (``simulator.routing``) choose over the instance
list they read; the placement ones ask ``POST /v1/placement`` (with the
prompt's keys when the policy sends them, ``routing.placement_body``) and
report each outcome to ``POST /v1/placement/feedback`` without holding the
request up, both on the Proxy's route listener, where routers belong
(docs/placement.md, "The route listener"); the list is read on its web port.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import orjson

from simulator import routing
from simulator.workload import MODEL

PLACEMENT_PATH = "/v1/placement"
FEEDBACK_PATH = "/v1/placement/feedback"
LIST_PATH = "/v1/instance/list"


class Router:
    """One policy's side of the benchmark: where each request goes, what it hears back."""

    def __init__(self, policy, session, base_url, fleet_ids, config, route_url=None):
        self.policy = policy
        self.session = session
        self.base = base_url
        self.route_base = (route_url or base_url).rstrip("/")  # placement and feedback
        self.fleet_ids = fleet_ids
        self.config = config
        self.client = (None if policy in routing.PLACEMENT_POLICIES
                       else routing.CLIENT_POLICIES[policy](config.workload.seed))
        self.placement_ms = []
        self.prefix_sources = {}  # the answers' prefix_source (SPEC 15.5; "none" when absent or null) -> count
        self.prompt_errors = {}  # a text or chat prompt's answers: prompt_error (SPEC 16.3) -> count
        self.feedback_failures = 0  # feedback the Proxy refused or never answered, but route_busy
        self.feedback_route_busy = 0  # feedback the route lane turned away (429 route_busy)
        self._tasks = set()

    async def read_list(self):
        """A client-side policy's view of the pool: one read of the list (the last one kept on failure)."""
        try:
            async with self.session.get(self.base + LIST_PATH) as response:
                rows = orjson.loads(await response.read()) if response.status == 200 else None
            self.client.update(routing.routable(rows, self.fleet_ids))
        except (aiohttp.ClientError, TimeoutError, orjson.JSONDecodeError):
            pass  # keep routing over the last list read

    async def refresh(self):
        """Re-read the list every ``LIST_REFRESH_S`` (after a first read the caller awaited)."""
        while True:
            await asyncio.sleep(routing.LIST_REFRESH_S)
            await self.read_list()

    async def route(self, request, now_s, exclude=()):
        """``(action, instance_id)`` for one ``RoutedRequest`` (``routing.SEND`` with an id, or why not),
        not to the instances of ``exclude`` (the ones that refused it)."""
        if self.client is not None:
            instance_id = self.client.choose(now_s, exclude)
            return (routing.SEND, instance_id) if instance_id is not None else (routing.UNAVAILABLE, None)
        body = routing.placement_body(self.policy, MODEL, request.prompt_tokens, request.output_tokens,
                                      self.config.placement_count, request.keys, exclude, self.config.prompt_form,
                                      request.content)
        started = time.perf_counter()
        try:
            async with self.session.post(self.route_base + PLACEMENT_PATH, data=orjson.dumps(body)) as response:
                raw = await response.read()
                status = response.status
        except (aiohttp.ClientError, TimeoutError):
            return routing.ROUTE_ERROR, None
        self.placement_ms.append((time.perf_counter() - started) * 1000.0)
        try:
            data = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            data = None
        if status == 200 and isinstance(data, dict):
            source = str(data.get("prefix_source") or "none")
            self.prefix_sources[source] = self.prefix_sources.get(source, 0) + 1
            if data.get("prompt_error"):  # the Proxy could not key it (no tokenizer for MODEL?): load alone
                error = str(data["prompt_error"])
                self.prompt_errors[error] = self.prompt_errors.get(error, 0) + 1
        return routing.placement_choice(status, data, self.fleet_ids)

    def started(self, instance_id):
        if self.client is not None:
            self.client.started(instance_id)

    def finished(self, instance_id):
        if self.client is not None:
            self.client.finished(instance_id)

    def feedback(self, instance_id, outcome, status_code, now_s):
        """How the request went: the client-side policies leave a failed instance out a while; placement
        tells the Proxy, without holding the request up."""
        if self.client is not None:
            if outcome != "ok":
                self.client.failed(instance_id, now_s)
        else:
            task = asyncio.get_running_loop().create_task(self._feedback(instance_id, outcome, status_code))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _feedback(self, instance_id, outcome, status_code):
        body = {"instance_id": instance_id, "outcome": outcome, "status_code": status_code}
        try:
            async with self.session.post(self.route_base + FEEDBACK_PATH, data=orjson.dumps(body)) as response:
                raw = await response.read()
                if response.status == 429 and b'"route_busy"' in raw:
                    self.feedback_route_busy += 1
                elif response.status != 200:
                    self.feedback_failures += 1
        except (aiohttp.ClientError, TimeoutError):
            self.feedback_failures += 1

    async def drain(self):
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

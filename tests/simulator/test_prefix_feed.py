"""The fleet's prefix caches reaching a fake Proxy over real HTTP (SPEC 15.3): what is sent, and how the
feed reacts to ``resync``, ``unknown_instance`` and a Proxy without the endpoint."""

import asyncio

import aiohttp
from aiohttp import web

from simulator import routing
from simulator.model import build_fleet
from simulator.prefix_feed import PREFIX_BLOCKS_PATH, PrefixFeed, engine_name
from simulator.prompts import SHARED_PREFIX
from simulator.routing_run import ROUTING_PROFILE, prepare_fleet
from simulator.workload import RoutingWorkload

WORKLOAD = RoutingWorkload.of(SHARED_PREFIX, seed=3)


class FakeIndex:
    """SPEC 15.3's endpoint in memory: per (instance, engine) its epoch, seq and keys; a gap asks a resync."""

    def __init__(self, known=None, missing=False):
        self.known = known  # instance ids it knows (None: all)
        self.missing = missing
        self.sets, self.state, self.bodies = {}, {}, []
        self.lose = False  # forget everything before the next body (a lost index)

    async def handle(self, request):
        if self.missing:
            return web.json_response({"ok": False, "error": "not_found"}, status=404)
        body = await request.json()
        self.bodies.append(body)
        if self.known is not None and body["instance_id"] not in self.known:
            return web.json_response({"ok": False, "error": "unknown_instance"})
        if self.lose:
            self.lose = False
            self.sets, self.state = {}, {}
        name = (body["instance_id"], body["engine"])
        if body["reset"]:
            self.sets[name] = set()
        elif self.state.get(name) != (body["epoch"], body["seq"] - 1):
            return web.json_response({"ok": True, "resync": True})
        self.state[name] = (body["epoch"], body["seq"])
        self.sets[name] = (self.sets[name] | set(body["added"])) - set(body["removed"])
        return web.json_response({"ok": True, "resync": False})


def fleet(count=3, policy=routing.PLACEMENT):
    hosts = build_fleet(range(count), count, seed=3, profile=ROUTING_PROFILE)
    prepare_fleet(hosts, WORKLOAD, policy)
    return {host.instance_id: host for host in hosts}


def feeding(index, hosts, rounds):
    """Run ``rounds(feed)`` (a coroutine function) against ``index`` served over HTTP."""

    async def main():
        app = web.Application()
        app.router.add_post(PREFIX_BLOCKS_PATH, index.handle)
        runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        try:
            async with aiohttp.ClientSession() as session:
                feed = PrefixFeed(session, f"http://127.0.0.1:{port}", hosts, epoch=100)
                await rounds(feed)
                return feed
        finally:
            await runner.cleanup()

    return asyncio.run(main())


def caches(hosts):
    return {(instance_id, publisher_engine): rank.cache
            for instance_id, host in hosts.items()
            for publisher_engine, rank in zip(engine_names(host), host.engine.ranks)}


def engine_names(host):
    return [engine_name(host.engine, rank) for rank in host.engine.ranks]


def test_the_proxys_copy_follows_every_engines_cache():
    hosts = fleet()
    index = FakeIndex()

    async def rounds(feed):
        for step in range(4):
            for n, cache in enumerate(caches(hosts).values()):
                cache.store(range(n * 1000 + step * 300, n * 1000 + step * 300 + 400 + step * 2000))
            await feed.flush()

    feed = feeding(index, hosts, rounds)
    assert {name: set(cache.blocks) for name, cache in caches(hosts).items()} == index.sets
    assert feed.stats()["resets"] == len(caches(hosts)) and feed.stats()["failures"] == {}
    first = index.bodies[0]
    assert first["reset"] and first["epoch"] == 101 and first["seq"] == 0 and first["block_tokens"] == 16


def test_a_lost_index_gets_the_whole_set_again():
    hosts = fleet(count=1)
    index = FakeIndex()
    [cache] = caches(hosts).values()

    async def rounds(feed):
        cache.store(range(10))
        await feed.flush()
        index.lose = True
        cache.store(range(10, 20))
        await feed.flush()  # answered resync: nothing applied
        await feed.flush()  # the reset

    feed = feeding(index, hosts, rounds)
    assert index.sets == {next(iter(caches(hosts))): set(range(20))}
    assert feed.stats()["resyncs"] == 1 and feed.stats()["resets"] == 2


def test_an_unknown_instance_is_counted_and_sent_its_set_once_known():
    hosts = fleet(count=1)
    index = FakeIndex(known=set())
    [cache] = caches(hosts).values()

    async def rounds(feed):
        cache.store(range(5))
        await feed.flush()
        index.known = set(hosts)  # the driver registered it
        await feed.flush()

    feed = feeding(index, hosts, rounds)
    assert feed.stats()["failures"] == {"unknown_instance": 1}
    assert index.sets == {next(iter(caches(hosts))): set(range(5))}


def test_a_proxy_without_the_endpoint_stops_the_feed():
    hosts = fleet()
    index = FakeIndex(missing=True)

    async def rounds(feed):
        for cache in caches(hosts).values():
            cache.store(range(5))
        await asyncio.wait_for(feed.run(), 5.0)  # returns: nothing more to send to

    feed = feeding(index, hosts, rounds)
    assert feed.stats()["endpoint_missing"] is True
    assert 1 <= feed.stats()["posts"] <= len(feed.publishers)  # those in flight together, then none


def test_a_learned_mode_fleet_publishes_nothing():
    hosts = fleet(policy=routing.PLACEMENT_LEARNED)

    async def rounds(feed):
        await feed.flush()

    assert feeding(FakeIndex(), hosts, rounds).publishers == []

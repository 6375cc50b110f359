"""The simulator's driver against a fake Proxy over real HTTP: what it sends, and how it reacts.

The fake Proxy is an aiohttp server on 127.0.0.1 in the test's own event
loop; it answers as SPEC 3 says and records every request. Runs are bounded
by a number of report slots (``rounds``), so every assertion is about what
was sent and answered, never about how long anything took.
"""

import asyncio
import contextlib
import socket
import threading

import pytest
from aiohttp import web

from simulator.config import RunConfig
from simulator.driver import FleetDriver
from simulator.model import FleetProfile
from simulator.processes import run_fleet
from simulator.protocol import classify_answer
from simulator.schedule import first_slot

CALM = FleetProfile.calm(unhealthy_gpu_share=0.0, capabilities_share=0.0)


class FakeProxy:
    """SPEC 3's instance endpoints in memory; ``on[name]`` may answer a request instead (return (status, body))."""

    def __init__(self, heartbeat_interval_s=10.0, snapshot_delay_s=0.0):
        self.heartbeat_interval_s = heartbeat_interval_s
        self.snapshot_delay_s = snapshot_delay_s
        self.known = {}  # instance_id -> capability fingerprint sent at register (None without)
        self.requests = []  # (endpoint name, body, Authorization header)
        self.on = {}
        self._runner = None

    def sent(self, name, instance_id=None):
        return [body for endpoint, body, _ in self.requests
                if endpoint == name and (instance_id is None or body["instance_id"] == instance_id)]

    async def handle(self, request):
        name = request.path.rsplit("/", 1)[-1]
        body = await request.json()
        self.requests.append((name, body, request.headers.get("Authorization")))
        if name == "resource_snapshot" and self.snapshot_delay_s:
            await asyncio.sleep(self.snapshot_delay_s)
        answer = self.on[name](body) if name in self.on else None
        if answer is not None:
            if answer == "hang":
                await asyncio.sleep(3600)
            status, payload = answer
            return web.json_response(payload, status=status)
        return web.json_response(getattr(self, name)(body))

    def register(self, body):
        self.known[body["instance_id"]] = body.get("capabilities")
        return {"instance_id": body["instance_id"], "heartbeat_interval_s": self.heartbeat_interval_s, "ttl_s": 30,
                "capability_fingerprint": None}

    def heartbeat(self, body):
        return {"ok": True} if body["instance_id"] in self.known else {"ok": False, "error": "unknown_instance"}

    def resource_snapshot(self, body):
        return self.heartbeat(body)

    def unregister(self, body):
        return {"ok": self.known.pop(body["instance_id"], False) is not False}

    async def start(self):
        app = web.Application()
        app.router.add_post("/v1/instance/{name}", self.handle)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def stop(self):
        await self._runner.cleanup()


def simulate(proxy, on_driver=None, **config):
    """Run a driver to its end against ``proxy``; returns the driver."""
    config = {"instances": 4, "interval_ms": 20, "rounds": 5, "profile": CALM, "timeout_s": 30.0, **config}

    async def main():
        url = await proxy.start()
        try:
            run = RunConfig(proxy_url=url, **config)
            driver = FleetDriver(run, run.indices())
            if on_driver is not None:
                on_driver(driver)
            await driver.run()
            return driver
        finally:
            await proxy.stop()

    return asyncio.run(main())


@contextlib.contextmanager
def serving(proxy):
    """The fake Proxy on its own thread and event loop, for clients in other processes."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield asyncio.run_coroutine_threadsafe(proxy.start(), loop).result(timeout=60)
    finally:
        asyncio.run_coroutine_threadsafe(proxy.stop(), loop).result(timeout=60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=60)
        loop.close()


def seqs(proxy, instance_id):
    return [body["metadata"]["report_seq"] for body in proxy.sent("resource_snapshot", instance_id)]


def slots_accounted(stats):
    return sum(stats.events[name] for name in ("report_slots", "skipped_slots", "backoff_slots", "shed_slots"))


def test_it_registers_reports_each_slot_and_unregisters_at_the_end():
    proxy = FakeProxy()
    stats = simulate(proxy).stats

    assert [name for name, body, _ in proxy.requests if body["instance_id"] == "sim-00002"][0] == "register"
    assert [name for name, body, _ in proxy.requests if body["instance_id"] == "sim-00002"][-1] == "unregister"
    assert len(proxy.sent("register")) == 4 and len(proxy.sent("unregister")) == 4
    assert proxy.known == {}
    assert slots_accounted(stats) == 4 * 5
    for i in range(4):
        reported = seqs(proxy, f"sim-0000{i}")
        assert reported == list(range(1, len(reported) + 1))
    assert stats.sent("snapshot") == stats.acknowledged("snapshot") == len(proxy.sent("resource_snapshot"))
    assert stats.sent() == stats.acknowledged() == len(proxy.requests)
    assert stats.errors() == {}
    assert stats.registered == 0 and stats.finished


def test_a_ramped_start_still_gives_every_instance_its_slots():
    proxy = FakeProxy()
    stats = simulate(proxy, instances=6, rounds=3, ramp_s=0.06).stats  # over three intervals

    assert len(proxy.sent("register")) == 6
    assert slots_accounted(stats) == 6 * 3
    assert stats.errors() == {}


def test_it_sends_the_body_the_proxy_stores():
    proxy = FakeProxy()
    simulate(proxy, instances=1, rounds=2, unregister=False)
    body = proxy.sent("resource_snapshot")[0]

    assert set(body) == {"instance_id", "snapshot", "metadata"}
    assert set(body["metadata"]) == {"reported_instance_id", "report_monotonic_ms", "report_wall_time_ms",
                                     "agent_snapshot_timestamp_ms", "report_seq"}
    assert body["snapshot"]["schema_version"] == "resource_snapshot_v1"


def test_it_sends_a_bearer_token_when_given_one_and_none_otherwise():
    with_token, without = FakeProxy(), FakeProxy()
    simulate(with_token, token="s3cret", instances=2, rounds=2)
    simulate(without, instances=2, rounds=2)

    assert {auth for _, _, auth in with_token.requests} == {"Bearer s3cret"}
    assert {auth for _, _, auth in without.requests} == {None}


def test_it_registers_again_at_once_when_the_proxy_forgot_it_and_loses_no_report():
    proxy = FakeProxy()

    def forget_once(body):
        if len(proxy.sent("resource_snapshot")) == 6:
            proxy.known.clear()  # a wiped database
        return None

    proxy.on["resource_snapshot"] = forget_once
    stats = simulate(proxy, instances=2, rounds=6).stats

    assert stats.errors() == {"unknown_instance": stats.events["reregistrations"]}
    assert stats.events["reregistrations"] >= 1
    assert len(proxy.sent("register")) == 2 + stats.events["reregistrations"]
    for instance_id in ("sim-00000", "sim-00001"):
        # The refused report was sent again after registering: every seq arrived.
        assert sorted(set(seqs(proxy, instance_id))) == list(range(1, max(seqs(proxy, instance_id)) + 1))


def test_it_counts_errors_by_kind_and_backs_off():
    proxy = FakeProxy()
    proxy.on["resource_snapshot"] = lambda body: {
        "sim-00000": (503, {"detail": "busy"}),
        "sim-00001": "hang",
        "sim-00002": (200, {"ok": False, "error": "something_else"}),
    }.get(body["instance_id"])
    stats = simulate(proxy, instances=4, rounds=4, timeout_s=0.3).stats

    errors = stats.errors()
    assert set(errors) == {"http_503", "timeout", "rejected"}
    assert errors["http_503"] == len(proxy.sent("resource_snapshot", "sim-00000"))
    assert stats.events["backoffs"] == sum(errors.values())
    assert stats.acknowledged("snapshot") == len(proxy.sent("resource_snapshot", "sim-00003"))
    assert slots_accounted(stats) == 4 * 4


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_it_counts_connection_errors_and_still_ends():
    config = RunConfig(proxy_url=f"http://127.0.0.1:{free_port()}", instances=3, interval_ms=20, rounds=3,
                       profile=CALM)
    stats = asyncio.run(FleetDriver(config, config.indices()).run())

    assert stats.acknowledged() == 0
    assert set(stats.errors()) == {"connection_error"}
    assert stats.sent("register") == stats.errors()["connection_error"]
    assert slots_accounted(stats) == 3 * 3


def test_it_sends_its_capabilities_again_when_the_proxy_asks_for_them():
    proxy = FakeProxy(heartbeat_interval_s=0.02)

    def check_fingerprint(body):
        if "capability_fingerprint" in body:
            return 200, {"ok": False, "error": "capability_fingerprint_mismatch", "requires_capabilities": True,
                         "expected_fingerprint": None, "reported_fingerprint": body["capability_fingerprint"]}
        return None

    proxy.on["heartbeat"] = check_fingerprint
    stats = simulate(proxy, instances=2, rounds=6, profile=FleetProfile.calm(capabilities_share=1.0)).stats
    heartbeats = proxy.sent("heartbeat")

    assert stats.events["capability_resyncs"] >= 1
    assert stats.events["capability_resyncs"] == len([b for b in heartbeats if "capability_fingerprint" in b])
    assert len([b for b in heartbeats if "capabilities" in b]) == stats.events["capability_resyncs"]
    assert stats.errors() == {}


def test_it_heartbeats_at_the_interval_the_register_answer_gives():
    proxy = FakeProxy(heartbeat_interval_s=0.01)
    stats = simulate(proxy, instances=2, rounds=5, interval_ms=30).stats

    heartbeats = proxy.sent("heartbeat")
    assert heartbeats and stats.acknowledged("heartbeat") == len(heartbeats)
    assert all(isinstance(body["inflight"], int) and body["qps_1m"] >= 0 for body in heartbeats)


def test_a_restarted_host_registers_again_and_counts_from_one():
    proxy = FakeProxy()
    restarting = FleetProfile.calm(restarts_per_hour=0.3 * 3_600_000 / 20, unhealthy_gpu_share=0.0)  # 0.3 a slot
    stats = simulate(proxy, instances=3, rounds=12, profile=restarting).stats

    assert stats.events["restarts"] >= 1
    assert len(proxy.sent("register")) == 3 + stats.events["restarts"]
    for i in range(3):
        instance_id = f"sim-0000{i}"
        order = [(name, body) for name, body, _ in proxy.requests if body["instance_id"] == instance_id]
        for (name, _), (next_name, next_body) in zip(order, order[1:]):
            if next_name == "resource_snapshot" and name == "register":
                assert next_body["metadata"]["report_seq"] == 1
    assert stats.errors() == {}


def test_a_stale_host_neither_reports_nor_heartbeats_while_silent():
    proxy = FakeProxy(heartbeat_interval_s=0.01)
    silent = FleetProfile.calm(stale_per_hour=0.5 * 3_600_000 / 20, stale_spell_s=(0.06, 0.1))  # spells of 3-5 slots
    stats = simulate(proxy, instances=3, rounds=20, profile=silent).stats

    assert stats.events["stale_spells"] >= 1 and stats.events["silent_slots"] >= 3
    assert stats.sent("snapshot") == stats.events["report_slots"] - stats.events["silent_slots"]
    assert stats.errors() == {}


def test_a_stop_finishes_what_is_in_flight_then_unregisters():
    proxy = FakeProxy()
    drivers = []

    def stop_after_a_few(body):
        if len(proxy.sent("resource_snapshot")) == 5:
            drivers[0].request_stop()
        return None

    proxy.on["resource_snapshot"] = stop_after_a_few
    driver = simulate(proxy, on_driver=drivers.append, instances=3, rounds=None)

    assert driver.stats.acknowledged("snapshot") == len(proxy.sent("resource_snapshot")) >= 5
    assert len(proxy.sent("unregister")) == 3 and proxy.known == {}
    assert driver.stats.finished


def test_a_second_stop_abandons_the_unregistering():
    proxy = FakeProxy()
    drivers = []

    def stop_twice(body):
        drivers[0].request_stop()
        drivers[0].request_stop()
        return None

    proxy.on["resource_snapshot"] = stop_twice
    driver = simulate(proxy, on_driver=drivers.append, instances=3, rounds=None)

    assert proxy.sent("unregister") == []
    assert driver.stats.finished


def test_a_saturated_client_sheds_slots_rather_than_queueing_them():
    proxy = FakeProxy(snapshot_delay_s=0.03)  # three slots long
    stats = simulate(proxy, instances=4, rounds=6, interval_ms=10, connections=1).stats

    assert stats.events["shed_slots"] > 0
    assert slots_accounted(stats) == 4 * 6
    assert stats.errors() == {}


@pytest.mark.parametrize(("request_name", "status", "body", "outcome"), [
    ("snapshot", 200, b'{"ok": true}', "ok"),
    ("snapshot", 200, b'{"ok": true, "stale": true}', "ok"),
    ("snapshot", 200, b'{"ok": false, "error": "unknown_instance"}', "unknown_instance"),
    ("heartbeat", 200, b'{"ok": false, "error": "capability_fingerprint_unknown"}', "capability_resync"),
    ("register", 200, b'{"instance_id": "i-1", "heartbeat_interval_s": 10}', "ok"),
    ("register", 200, b'{"ok": true}', "bad_answer"),
    ("unregister", 200, b'{"ok": false}', "unknown_instance"),
    ("snapshot", 200, b"<html>", "bad_answer"),
    ("snapshot", 401, b'{"ok": false, "error": "unauthorized"}', "http_401"),
    ("snapshot", 429, b"", "http_429"),
    ("snapshot", 502, b"<html>bad gateway</html>", "http_502"),
])
def test_it_reads_the_proxys_answers(request_name, status, body, outcome):
    assert classify_answer(request_name, status, body).outcome == outcome


def test_a_late_round_skips_the_slots_it_overran():
    assert first_slot(10.0, 1.0, 9.5) == (10.0, 0)
    assert first_slot(10.0, 1.0, 10.0) == (10.0, 0)
    assert first_slot(10.0, 1.0, 12.5) == (13.0, 3)
    assert first_slot(10.0, 1.0, 13.0) == (13.0, 3)


def test_it_splits_the_fleet_over_processes_and_adds_up_their_counts():
    proxy = FakeProxy()
    updates = []
    with serving(proxy) as url:
        config = RunConfig(proxy_url=url, instances=6, interval_ms=50, rounds=4, processes=2, profile=CALM,
                           timeout_s=30.0)
        stats = run_fleet(config, on_progress=updates.append)

    assert sorted(body["instance_id"] for body in proxy.sent("register")) == [f"sim-0000{i}" for i in range(6)]
    assert len(proxy.sent("unregister")) == 6
    assert stats.instances == 6 and slots_accounted(stats) == 6 * 4
    assert stats.sent() == stats.acknowledged() == len(proxy.requests)
    assert stats.errors() == {}
    assert stats.finished and updates[-1].finished


def test_processes_share_the_fleet_without_overlap():
    config = RunConfig(instances=10, processes=3)
    shares = [list(config.indices(k)) for k in range(3)]
    assert sorted(i for share in shares for i in share) == list(range(10))
    assert shares[0] == [0, 3, 6, 9]

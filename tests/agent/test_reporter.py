"""Reporting to a Proxy: register, snapshots, heartbeats, recovery and backoff (SPEC 2.3).

The Proxy is a real HTTP server on loopback (``fake_proxy``); time is a
hand-moved clock and ``Reporter.step()`` is called directly, so backoff is
checked without waiting it out.
"""

import logging
import socket
import threading

import pytest

from agent import AGENT_VERSION
from agent.proxy_client import OK, ProxyClient
from agent.reporter import Backoff, FailureLog, Reporter
from agent.snapshot import SnapshotStore

REGISTER, SNAPSHOT = "/v1/instance/register", "/v1/instance/resource_snapshot"
HEARTBEAT, UNREGISTER = "/v1/instance/heartbeat", "/v1/instance/unregister"


@pytest.fixture
def store():
    store = SnapshotStore()
    store.put({"schema_version": "resource_snapshot_v1", "instance_id": "gpu-1", "timestamp_ms": 1_767_225_600_000})
    return store


def make_reporter(url, store, clock, token=None, timeout_s=2.0, **kwargs):
    kwargs.setdefault("backoff", Backoff(rand=lambda: 1.0))
    return Reporter(ProxyClient(url, token, timeout_s), store, instance_id="gpu-1", host="10.0.0.5", port=8000,
                    meta={"agent_version": AGENT_VERSION, "hostname": "node-5", "gpu_names": ["NVIDIA H100"]},
                    clock=clock.s, clock_wall_ms=lambda: 1_767_225_601_000, **kwargs)


def paths(proxy):
    return [path for path, _, _ in proxy.requests]


def test_it_registers_then_reports_snapshots_with_increasing_seq(fake_proxy, store, clock):
    reporter = make_reporter(fake_proxy.url, store, clock)
    wait = reporter.step()
    assert paths(fake_proxy) == [REGISTER, SNAPSHOT]
    assert wait == pytest.approx(1.0)
    [register] = fake_proxy.bodies(REGISTER)
    assert register == {"instance_id": "gpu-1", "host": "10.0.0.5", "port": 8000,
                        "meta": {"agent_version": AGENT_VERSION, "hostname": "node-5", "gpu_names": ["NVIDIA H100"]}}
    for _ in range(3):
        clock.advance(1000)
        reporter.step()
    snapshots = fake_proxy.bodies(SNAPSHOT)
    assert [body["metadata"]["report_seq"] for body in snapshots] == [1, 2, 3, 4]
    first = snapshots[0]
    assert first["instance_id"] == "gpu-1"
    assert first["snapshot"] == store.latest()
    assert first["metadata"] == {
        "reported_instance_id": "gpu-1",
        "report_monotonic_ms": 1_000_000,
        "report_wall_time_ms": 1_767_225_601_000,
        "agent_snapshot_timestamp_ms": 1_767_225_600_000,
        "report_seq": 1,
    }
    assert snapshots[3]["metadata"]["report_monotonic_ms"] == 1_003_000


def test_it_sends_nothing_before_it_is_due(fake_proxy, store, clock):
    reporter = make_reporter(fake_proxy.url, store, clock, report_interval_s=5.0)
    reporter.step()
    clock.advance(4000)
    assert reporter.step() == pytest.approx(1.0)
    assert len(fake_proxy.bodies(SNAPSHOT)) == 1


def test_it_heartbeats_at_the_interval_the_proxy_asked_for(fake_proxy, store, clock):
    fake_proxy.heartbeat_interval_s = 3
    reporter = make_reporter(fake_proxy.url, store, clock)
    reporter.step()
    assert reporter.heartbeat_interval_s == 3.0
    for _ in range(7):
        clock.advance(1000)
        reporter.step()
    assert fake_proxy.bodies(HEARTBEAT) == [{"instance_id": "gpu-1"}, {"instance_id": "gpu-1"}]


def test_it_sends_the_bearer_token(fake_proxy, store, clock):
    make_reporter(fake_proxy.url, store, clock, token="t0ken").step()
    assert {headers["Authorization"] for _, _, headers in fake_proxy.requests} == {"Bearer t0ken"}


def test_it_sends_no_authorization_header_without_a_token(fake_proxy, store, clock):
    make_reporter(fake_proxy.url, store, clock).step()
    assert all("Authorization" not in headers for _, _, headers in fake_proxy.requests)


def test_it_registers_at_once_with_a_proxy_that_forgot_it(fake_proxy, store, clock):
    reporter = make_reporter(fake_proxy.url, store, clock)
    reporter.step()
    fake_proxy.forget()  # e.g. restarted on a wiped database
    clock.advance(1000)
    reporter.step()
    assert paths(fake_proxy) == [REGISTER, SNAPSHOT, SNAPSHOT, REGISTER]
    clock.advance(1000)
    reporter.step()
    assert fake_proxy.requests[-1][0] == SNAPSHOT and "gpu-1" in fake_proxy.known
    assert reporter.registered


def test_it_adopts_an_id_assigned_by_the_proxy(fake_proxy, store, clock):
    fake_proxy.assign_id = "hp_10.0.0.5:8000"
    adopted = []
    reporter = make_reporter(fake_proxy.url, store, clock, on_instance_id=adopted.append)
    reporter.step()
    assert adopted == ["hp_10.0.0.5:8000"]
    assert fake_proxy.bodies(SNAPSHOT)[0]["instance_id"] == "hp_10.0.0.5:8000"


def test_it_reports_under_its_id_without_registering_and_backs_off_when_unknown(fake_proxy, store, clock):
    reporter = make_reporter(fake_proxy.url, store, clock, register=False)
    wait = reporter.step()
    assert paths(fake_proxy) == [SNAPSHOT]
    assert wait == pytest.approx(0.5)
    fake_proxy.known.add("gpu-1")  # the serving process registered itself
    clock.advance(500)
    reporter.step()
    assert paths(fake_proxy) == [SNAPSHOT, SNAPSHOT]
    assert not reporter.unregister()  # it never registered, so it never unregisters
    assert UNREGISTER not in paths(fake_proxy)


def test_it_backs_off_exponentially_from_a_down_proxy_up_to_30_s(fake_proxy, store, clock):
    fake_proxy.status = 503
    reporter = make_reporter(fake_proxy.url, store, clock)
    waits = []
    for _ in range(9):
        wait = reporter.step()
        waits.append(round(wait, 3))
        clock.advance(int(wait * 1000) - 1)
        assert reporter.step() == pytest.approx(0.001)  # still waiting: no request
        clock.advance(1)
    assert waits == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert paths(fake_proxy) == [REGISTER] * 9


def test_it_recovers_when_the_proxy_comes_back_and_the_backoff_resets(fake_proxy, store, clock):
    fake_proxy.status = 500
    reporter = make_reporter(fake_proxy.url, store, clock)
    for _ in range(4):
        clock.advance(int(reporter.step() * 1000))
    fake_proxy.status = None
    assert reporter.step() == pytest.approx(1.0)
    assert paths(fake_proxy)[-2:] == [REGISTER, SNAPSHOT]
    fake_proxy.status = 503
    clock.advance(1000)
    assert reporter.step() == pytest.approx(0.5)  # a new streak starts from the bottom


def test_it_spreads_retries_between_half_and_full_delay():
    low, high = Backoff(rand=lambda: 0.0), Backoff(rand=lambda: 0.999999)
    assert [round(low.next_delay(), 3) for _ in range(4)] == [0.25, 0.5, 1.0, 2.0]
    assert [round(high.next_delay(), 3) for _ in range(4)] == [0.5, 1.0, 2.0, 4.0]
    real = Backoff()
    delays = [real.next_delay() for _ in range(20)]
    assert all(0.25 <= d <= 0.5 for d in delays[:1]) and all(15.0 <= d <= 30.0 for d in delays[10:])


@pytest.mark.parametrize("content_type, answer", [
    ("text/html", b"<html><body>Welcome to nginx!</body></html>"),
    ("application/json", b"[1, 2, 3]"),
    ("application/json", b'"ok"'),
])
def test_it_takes_a_200_that_is_not_a_json_object_for_a_failure_and_logs_it(
        fake_proxy, store, clock, caplog, content_type, answer):
    fake_proxy.raw_answer = (content_type, answer)
    reporter = make_reporter(fake_proxy.url, store, clock)
    with caplog.at_level(logging.WARNING, logger="agent.reporter"):
        assert reporter.step() == pytest.approx(0.5)  # backing off, as from a Proxy that is down
    assert not reporter.registered
    assert len(caplog.records) == 1
    assert "HTTP 200 but not a JSON object" in caplog.records[0].message


def test_it_spends_one_timeout_not_a_thread_on_a_hanging_proxy(store, clock):
    # A listener that never accepts: the connection sits in the backlog unanswered.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        reporter = make_reporter(f"http://127.0.0.1:{sock.getsockname()[1]}", store, clock, timeout_s=0.2)
        before = set(threading.enumerate())
        assert reporter.step() == pytest.approx(0.5)
        # Threads of earlier tests may still be ending; none may have started.
        assert set(threading.enumerate()) - before == set()


def test_it_logs_failures_once_then_summarises_them_each_minute(caplog, clock):
    failures = FailureLog(logging.getLogger("test.failures"), clock.s, every_s=60)
    with caplog.at_level(logging.INFO, logger="test.failures"):
        failures.failure("report failed: refused")
        for _ in range(30):
            clock.advance(1000)
            failures.failure("report failed: refused")
        assert len(caplog.records) == 1
        for _ in range(30):
            clock.advance(1000)
            failures.failure("report failed: timeout")
        assert len(caplog.records) == 2
        assert "60 more failures in the last 60 s; latest: report failed: timeout" in caplog.records[1].message
        failures.success()
        failures.success()
    assert len(caplog.records) == 3
    assert "after 61 failed attempts over 60 s" in caplog.records[2].message


def test_it_logs_a_bounded_number_of_lines_over_a_long_outage(fake_proxy, store, clock, caplog):
    fake_proxy.status = 503
    reporter = make_reporter(fake_proxy.url, store, clock)
    with caplog.at_level(logging.WARNING, logger="agent.reporter"):
        for _ in range(40):  # about 17 minutes of retries at the 30 s cap
            clock.advance(int(reporter.step() * 1000) + 1)
    assert len(fake_proxy.requests) == 40
    assert 1 < len(caplog.records) <= 18


def test_it_unregisters_at_shutdown(fake_proxy, store, clock):
    reporter = make_reporter(fake_proxy.url, store, clock)
    reporter.step()
    assert reporter.unregister() is True
    assert fake_proxy.bodies(UNREGISTER) == [{"instance_id": "gpu-1"}]
    assert "gpu-1" not in fake_proxy.known


def test_it_registers_and_sends_one_snapshot_in_report_once(fake_proxy, store, clock):
    answer = make_reporter(fake_proxy.url, store, clock).report_once()
    assert answer.kind == OK
    assert paths(fake_proxy) == [REGISTER, SNAPSHOT]


def test_it_tells_a_failure_in_report_once(fake_proxy, store, clock):
    fake_proxy.status = 401
    answer = make_reporter(fake_proxy.url, store, clock).report_once()
    assert answer.kind == "rejected" and "HTTP 401" in answer.detail


def test_it_reports_on_its_thread_until_stopped_and_leaves_none_behind(fake_proxy, store):
    reporter = Reporter(ProxyClient(fake_proxy.url, timeout_s=2.0), store, instance_id="gpu-1", host="h", port=1,
                        report_interval_s=0.01)
    reporter.start()
    assert fake_proxy.wait_for(lambda proxy: len(proxy.bodies(SNAPSHOT)) >= 3, 10)
    reporter.stop()
    assert not any(thread.name == "fleetwatch-reporter" for thread in threading.enumerate())
    seqs = [body["metadata"]["report_seq"] for body in fake_proxy.bodies(SNAPSHOT)]
    assert seqs == list(range(1, len(seqs) + 1))

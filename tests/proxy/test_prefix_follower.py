"""The prefix copy's follower (``proxy_app.prefix.follower``, ``keeper``): after the copy's first build a request
only looks up; the thread's round, once an interval, brings the copy up to date."""

import logging
import threading

import pytest
from django.db import OperationalError, connection
from django.test.utils import CaptureQueriesContext

from proxy_app.prefix.follower import Follower
from proxy_app.prefix.keeper import PrefixKeeper
from tests.factories import T0


def send(api, seq, added=(), removed=(), reset=False):
    answer = api.post("/v1/instance/prefix_blocks", {
        "instance_id": "i-1", "engine": "e0", "epoch": 1, "seq": seq, "block_tokens": 16, "reset": reset,
        "added": list(added), "removed": list(removed)})
    assert answer.json() == {"ok": True, "resync": False}


@pytest.mark.django_db
def test_after_the_first_build_a_request_reads_nothing_and_the_thread_s_round_catches_up(
        api, register_instance, frozen, settings):
    settings.FLEETWATCH_PLACEMENT_REFRESH_S = 0.25  # as served: the thread follows every 0.5 s
    register_instance("i-1")
    keeper = PrefixKeeper()
    keeper.follower.interval_s = lambda: 3600.0  # the thread sleeps through the test; its round is called here
    try:
        send(api, 0, added=[1, 2], reset=True)
        assert keeper.hits("events", [1, 2, 3], T0) == {"i-1": 2}  # the first build, in the request
        assert keeper.follower.running()
        send(api, 1, added=[3], removed=[1])
        frozen.shift(1)
        with CaptureQueriesContext(connection) as queries:
            assert keeper.hits("events", [2, 3], T0 + 1) == {"i-1": 1}  # the copy as it was
        assert len(queries) == 0
        keeper.catch_up()
        assert keeper.hits("events", [2, 3], T0 + 1) == {"i-1": 2}
        assert keeper.hits("events", [1], T0 + 1) == {}
    finally:
        keeper.reset()
    assert not keeper.follower.running()


@pytest.mark.django_db
def test_without_the_thread_a_request_catches_up_when_the_copy_is_due(api, register_instance, frozen, settings):
    settings.FLEETWATCH_PLACEMENT_REFRESH_S = 0.25
    register_instance("i-1")
    keeper = PrefixKeeper(follow_in_thread=False)
    send(api, 0, added=[1], reset=True)
    assert keeper.hits("events", [1, 2], T0) == {"i-1": 1}
    send(api, 1, added=[2])
    assert keeper.hits("events", [1, 2], T0 + 0.4) == {"i-1": 1}  # read 0.4 s ago: not due
    assert keeper.hits("events", [1, 2], T0 + 0.5) == {"i-1": 2}
    assert not keeper.follower.running()


def test_the_thread_runs_its_step_each_interval_until_stopped_and_one_at_a_time():
    rounds = threading.Semaphore(0)
    follower = Follower("fleetwatch-test-follower", rounds.release, lambda: 0.01)
    follower.ensure_running()
    follower.ensure_running()
    try:
        assert [t.name for t in threading.enumerate()].count("fleetwatch-test-follower") == 1
        assert rounds.acquire(timeout=10) and rounds.acquire(timeout=10)
    finally:
        follower.stop()
    assert not follower.running()
    assert "fleetwatch-test-follower" not in [t.name for t in threading.enumerate()]
    follower.ensure_running()  # started again by the next request that needs it
    try:
        assert follower.running() and rounds.acquire(timeout=10)
    finally:
        follower.stop()


def test_a_failed_round_is_logged_and_the_next_one_tries_again(caplog):
    calls, again = [], threading.Event()

    def step():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the database is away")
        again.set()

    follower = Follower("fleetwatch-test-follower", step, lambda: 0.01)
    with caplog.at_level(logging.ERROR, logger="proxy_app.prefix.follower"):
        follower.ensure_running()
        try:
            assert again.wait(10)
        finally:
            follower.stop()
    assert "the database is away" in caplog.text


def test_a_database_outage_is_one_warning_and_one_recovery_line_without_a_traceback(caplog):
    calls, recovered = [], threading.Event()

    def step():
        calls.append(1)
        if len(calls) <= 3:
            raise OperationalError("connection refused\nIs the server running?")
        recovered.set()

    follower = Follower("fleetwatch-test-follower", step, lambda: 0.01)
    with caplog.at_level(logging.INFO):
        follower.ensure_running()
        try:
            assert recovered.wait(10)
        finally:
            follower.stop()
    lines = [record for record in caplog.records if record.name == "fleetwatch.database"]
    assert len(lines) == 2, [record.getMessage() for record in lines]
    assert lines[0].getMessage().startswith("database unavailable")
    assert "connection refused" in lines[0].getMessage() and "Is the server" not in lines[0].getMessage()
    assert lines[1].getMessage().startswith("database reachable again")
    assert not any(record.exc_info for record in caplog.records)

"""Group commit (``controlplane.api.group_commit``) with the Proxy's own reports, outside any test transaction:
reports that arrive together share one commit, each answered after it, and one bad report fails no other."""

import functools
import threading
import time

import pytest
from django.db import OperationalError, connection, transaction

from controlplane.api.group_commit import GroupCommit, Report, run_batch
from proxy_app.ingest.store import IngestResult, prepare_snapshot, store_snapshot
from proxy_app.managers import Heartbeat
from proxy_app.models import Instance, InstanceResource
from tests.factories import T0, make_snapshot
from tests.strategies import transaction_open

pytestmark = pytest.mark.django_db(transaction=True)


def snapshot_work(instance_id, cpu, seq, now):
    columns, raw_json = prepare_snapshot(make_snapshot(cpu=cpu), {"report_seq": seq}, now)
    return functools.partial(store_snapshot, instance_id, columns, raw_json, now)


@pytest.fixture
def fleet(register_instance, frozen):
    for name in ("i-1", "i-2", "i-3", "i-4"):
        register_instance(name)


def test_it_runs_a_lone_report_at_once_in_its_own_commit(fleet):
    reports = GroupCommit()
    started = time.perf_counter()
    assert reports.commit(snapshot_work("i-1", 42.0, 1, T0 + 1)) is IngestResult.STORED
    assert time.perf_counter() - started < 1  # no timer: nothing waits for company
    assert (reports.batches, reports.reports) == (1, 1)
    assert not transaction_open()
    assert InstanceResource.objects.get(pk="i-1").cpu_util == 42.0


def test_it_gives_the_reports_that_arrive_during_a_commit_the_next_one_each_answered_after_it(fleet):
    reports = GroupCommit()
    release = threading.Event()
    committed, answers, threads = set(), {}, []

    def leader_work():
        release.wait(10)  # the commit in progress while the others arrive
        return "first"

    def tracked(name, work):
        def run():
            transaction.on_commit(lambda: committed.add(name))
            return work()
        return run

    def send(name, work):
        answer = reports.commit(tracked(name, work))
        answers[name] = (answer, name in committed, threading.get_ident())
        connection.close()

    works = {
        "leader": leader_work,
        "snapshot": snapshot_work("i-1", 42.0, 1, T0 + 1),
        "stale": snapshot_work("i-2", 7.0, 0, T0 + 1),  # below the seq stored next: its contact alone
        "heartbeat": functools.partial(Instance.objects.heartbeat, "i-3", T0 + 1, {"inflight": 3}),
        "unregister": functools.partial(Instance.objects.unregister, "i-4", T0 + 1),
        "unknown": snapshot_work("i-9", 1.0, 1, T0 + 1),
    }
    assert store_snapshot("i-2", *prepare_snapshot(make_snapshot(cpu=3.0), {"report_seq": 5}, T0), T0)
    for name, work in works.items():
        threads.append(threading.Thread(target=send, args=(name, work)))
        threads[-1].start()
        queued = len(threads) - 1  # the leader took its own report out of the queue; the others wait in it
        deadline = time.monotonic() + 10
        while (not reports._committing or len(reports._queue) < queued) and time.monotonic() < deadline:
            time.sleep(0.001)
    release.set()
    for thread in threads:
        thread.join(10)

    assert (reports.batches, reports.reports) == (2, 6)  # the leader's, then everything queued meanwhile
    assert {name: answer[:2] for name, answer in answers.items()} == {
        "leader": ("first", True), "snapshot": (IngestResult.STORED, True), "stale": (IngestResult.STALE, True),
        "heartbeat": ((Heartbeat.OK, None), True), "unregister": (True, True),
        "unknown": (IngestResult.UNKNOWN, True),
    }
    assert InstanceResource.objects.get(pk="i-1").cpu_util == 42.0
    assert InstanceResource.objects.get(pk="i-2").cpu_util == 3.0
    assert Instance.objects.get(pk="i-2").last_seen_at == T0 + 1
    assert Instance.objects.get(pk="i-3").inflight == 3
    assert not Instance.objects.filter(pk="i-4").exists()


def test_a_batch_with_one_bad_row_fails_no_other_report(fleet):
    bad_columns, bad_raw = prepare_snapshot(make_snapshot(cpu=9.0), {"report_seq": 1}, T0 + 1)
    bad_columns["report_seq"] = 2 ** 70  # no database stores it: the row is refused
    batch = [
        Report(snapshot_work("i-1", 42.0, 1, T0 + 1)),
        Report(functools.partial(store_snapshot, "i-2", bad_columns, bad_raw, T0 + 1)),
        Report(functools.partial(Instance.objects.heartbeat, "i-3", T0 + 1, {"inflight": 5})),
    ]
    run_batch(batch)
    assert batch[0].outcome() is IngestResult.STORED
    with pytest.raises(Exception):
        batch[1].outcome()
    assert batch[2].outcome() == (Heartbeat.OK, None)
    assert InstanceResource.objects.get(pk="i-1").cpu_util == 42.0
    assert not InstanceResource.objects.filter(pk="i-2").exists()
    assert Instance.objects.get(pk="i-2").last_seen_at == T0  # the bad report left nothing, not even its contact
    assert Instance.objects.get(pk="i-3").inflight == 5
    assert not transaction_open()


def test_an_unavailable_database_refuses_every_report_of_the_batch_without_retrying(fleet):
    calls = []

    def unavailable():
        calls.append(1)
        raise OperationalError("connection refused")

    batch = [Report(snapshot_work("i-1", 42.0, 1, T0 + 1)), Report(unavailable), Report(unavailable)]
    run_batch(batch)
    for report in batch:
        with pytest.raises(OperationalError):
            report.outcome()
    assert len(calls) == 1  # the batch's attempt only: each would meet the same outage
    assert not InstanceResource.objects.filter(pk="i-1").exists()


class Deadlock(Exception):
    sqlstate = "40P01"  # what psycopg's DeadlockDetected carries


def test_a_batch_rolled_back_by_a_deadlock_runs_again_one_by_one_and_fails_nothing(fleet):
    attempts = []

    def meets_another_batch_once():
        attempts.append(1)
        if len(attempts) == 1:
            try:
                raise Deadlock("deadlock detected")
            except Deadlock as cause:
                raise OperationalError("deadlock detected") from cause
        return "stored"

    batch = [Report(snapshot_work("i-1", 42.0, 1, T0 + 1)), Report(meets_another_batch_once)]
    run_batch(batch)
    assert [report.outcome() for report in batch] == [IngestResult.STORED, "stored"]
    assert InstanceResource.objects.get(pk="i-1").cpu_util == 42.0

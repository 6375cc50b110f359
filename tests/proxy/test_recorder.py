"""The recorder: PoolResource rows and the instance series, written apart from ingest (SPEC 9)."""

import threading

import pytest

from proxy_app.models import InstanceSample, PoolResource
from proxy_app.ops.history import latest_pool_resource, record, record_instances, record_pool, run_recorder
from tests.factories import T0, make_gpu, make_snapshot

pytestmark = pytest.mark.django_db


def test_it_copies_each_snapshot_once(register_instance, report, frozen):
    register_instance("i-1")
    report("i-1", make_snapshot(cpu=10.0), seq=1)
    assert record_instances() == 1
    assert record_instances() == 0  # nothing new
    frozen.shift(1)
    report("i-1", make_snapshot(cpu=20.0), seq=2)
    assert record_instances() == 1
    assert list(InstanceSample.objects.order_by("t").values_list("t", "cpu_util")) == [(T0, 10.0), (T0 + 1, 20.0)]


def test_it_copies_the_figures_of_a_snapshot(register_instance, report, frozen):
    register_instance("i-1")
    gpus = [make_gpu(0, avg=40.0, peak=90.0, used=20000.0, total=80000.0),
            make_gpu(1, avg=60.0, peak=70.0, used=60000.0, total=80000.0)]
    report("i-1", make_snapshot(cpu=33.0, used_mb=2000.0, total_mb=8000.0, gpus=gpus, admission="degraded"))
    record_instances()
    row = InstanceSample.objects.get()
    assert (row.instance_id, row.cpu_util, row.memory_used_ratio) == ("i-1", 33.0, 0.25)
    assert (row.gpu_util_avg, row.gpu_util_max, row.gpu_mem_used_ratio) == (50.0, 90.0, 0.5)
    assert (row.network_rx_mbps, row.network_tx_mbps, row.admission_state) == (1.0, 2.0, "degraded")


def test_it_keeps_unknowns_null(register_instance, report, frozen):
    register_instance("i-1")
    report("i-1", make_snapshot(cpu=None, used_mb=None, total_mb=None, free_mb=None, gpus=()))
    record_instances()
    row = InstanceSample.objects.get()
    assert (row.cpu_util, row.memory_used_ratio, row.gpu_util_avg, row.gpu_mem_used_ratio) == (None,) * 4


def test_it_skips_instances_without_a_snapshot(register_instance, report, frozen):
    register_instance("quiet")
    register_instance("i-1")
    report("i-1")
    assert record_instances() == 1
    assert list(InstanceSample.objects.values_list("instance_id", flat=True)) == ["i-1"]


def test_it_stores_the_pool_summary_with_its_figures(register_instance, report, frozen):
    register_instance("i-1")
    report("i-1", make_snapshot(cpu=40.0))
    register_instance("i-2")
    row = record_pool()
    assert row.t == T0
    assert (row.alive, row.total, row.with_resource, row.cpu_avg) == (2, 2, 1, 40.0)
    assert row.pool_admission_state == "degraded"  # i-2 is alive without a resource
    assert row.summary["instances"]["missing_resource"] == 1


def test_it_offers_the_newest_pool_resource_while_fresh(register_instance, frozen):
    record_pool()
    assert latest_pool_resource(max_age_s=2).t == T0
    frozen.shift(3)
    assert latest_pool_resource(max_age_s=2) is None


class TickingClock:
    """A monotonic clock that moves only when the recorder waits."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class CountingStop(threading.Event):
    """Stops after ``ticks`` waits; each wait moves the clock by the time waited."""

    def __init__(self, clock, ticks):
        super().__init__()
        self.clock, self.ticks, self.waits = clock, ticks, []

    def wait(self, timeout=None):
        self.waits.append(timeout)
        self.clock.now += timeout
        if len(self.waits) >= self.ticks:
            self.set()
        return self.is_set()


def test_it_records_once_per_interval_at_a_fixed_rate(register_instance, report, frozen, monkeypatch):
    clock = TickingClock()
    ticks = []
    monkeypatch.setattr("proxy_app.ops.history.record", lambda now=None: ticks.append(clock.now))
    monkeypatch.setattr("proxy_app.ops.history.FenceSweeper.sweep", lambda self, now: 0)  # the loop's timing only
    stop = CountingStop(clock, ticks=4)
    run_recorder(stop, interval_s=1.0, monotonic=clock)
    assert ticks == [0.0, 1.0, 2.0, 3.0]
    assert stop.waits == [1.0, 1.0, 1.0, 1.0]


def test_it_outlives_a_failing_tick(frozen, monkeypatch, caplog):
    clock = TickingClock()
    calls = []

    def flaky(now=None):
        calls.append(clock.now)
        if len(calls) == 1:
            raise RuntimeError("database is locked")

    monkeypatch.setattr("proxy_app.ops.history.record", flaky)
    monkeypatch.setattr("proxy_app.ops.history.FenceSweeper.sweep", lambda self, now: 0)
    run_recorder(CountingStop(clock, ticks=3), interval_s=1.0, monotonic=clock)
    assert len(calls) == 3
    assert "a tick failed" in caplog.text


def test_it_writes_both_series_in_one_tick(register_instance, report, frozen):
    register_instance("i-1")
    report("i-1")
    assert record() == 1
    assert PoolResource.objects.count() == 1 and InstanceSample.objects.count() == 1


def test_it_says_an_outage_once_without_a_traceback_and_once_that_it_is_over(frozen, monkeypatch, caplog):
    from django.db import OperationalError

    from controlplane.db_outage import Outage
    from proxy_app.ops import history

    clock = TickingClock()
    calls = []

    def unavailable_then_back(now=None):
        calls.append(clock.now)
        if len(calls) <= 3:
            raise OperationalError("unable to open database file")

    monkeypatch.setattr(history, "OUTAGE", Outage(history.OUTAGE.consequence, monotonic=clock))
    monkeypatch.setattr(history, "record", unavailable_then_back)
    monkeypatch.setattr("proxy_app.ops.history.FenceSweeper.sweep", lambda self, now: 0)  # the loop's logging only
    run_recorder(CountingStop(clock, ticks=5), interval_s=1.0, monotonic=clock)
    assert len(calls) == 5
    assert [(record.levelname, record.getMessage(), record.exc_info) for record in caplog.records] == [
        ("WARNING", "database unavailable (unable to open database file): the recorder writes no series until "
                    "it is back", None),
        ("WARNING", "database reachable again after 3.0 s", None),
    ]

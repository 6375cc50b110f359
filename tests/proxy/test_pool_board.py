"""A web process's columns of the pool (``proxy_app.pool.columns``) stay equal to the pool itself.

The other tests read the whole pool on every summary (refresh 0); here the
columns are kept between reads and brought up to date from the rows whose
contact changed, as in a server: every read must answer what a read of the
whole pool answers.
"""

import random

import pytest

from controlplane import clock
from proxy_app.models import Instance
from proxy_app.pool.columns import FIELDS, LEDGER, PoolColumns, PoolColumnsKeeper
from tests.factories import make_engine, make_gpu, make_snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def incremental(settings):
    settings.FLEETWATCH_PLACEMENT_REFRESH_S = 0.25


def whole_pool(now):
    """The totals of a read of every row, as a fresh process makes it."""
    ledger = PoolColumnsKeeper()
    ledger._read_all()
    ledger.full_at = ledger.read_at = now
    return ledger.board.totals(now, Instance.ttl_s(), 5.0, 0.8)


def same(totals, expected):
    """Equal, the sums up to their rounding (a process adds its slots in its own order)."""
    assert totals.keys() == expected.keys()
    for name, value in expected.items():
        assert totals[name] == (pytest.approx(value, rel=1e-12) if isinstance(value, float) else value), name
    return True


def _snapshot(rng):
    engines = [make_engine(model=rng.choice(["tiny", "big", None]), requests_waiting=rng.choice([0, 3, None]),
                           kv_cache_usage_ratio=rng.choice([0.1, 0.9, None]), status=rng.choice(["ok", "error"]))
               for _ in range(rng.randint(0, 2))]
    gpus = [make_gpu(index, avg=rng.uniform(0, 100)) for index in range(rng.randint(0, 2))]
    return make_snapshot(cpu=rng.uniform(0, 100), gpus=gpus, engines=engines,
                         admission=rng.choice(["accepting", "degraded", "rejecting"]))


def test_each_read_answers_what_a_read_of_the_whole_pool_answers(frozen, register_instance, report, api):
    rng = random.Random(7)
    known = []
    for step in range(60):
        frozen.shift(0.001)  # each write of an instance moves its contact, as a running clock does
        action = rng.random()
        if action < 0.35 or not known:
            name = f"i-{step}"
            register_instance(name)
            known.append(name)
        elif action < 0.8:
            name = rng.choice(known)
            assert report(name, _snapshot(rng)).status_code == 200
        elif action < 0.9:
            name = known.pop(rng.randrange(len(known)))
            assert api.post("/v1/instance/unregister", {"instance_id": name}).status_code == 200
        else:
            frozen.shift(rng.choice([1, 20]))  # some go stale, some are seen again
        now = clock.now()
        assert same(LEDGER.totals(now), whole_pool(now)), step
    assert LEDGER.totals(clock.now())["total"] == len(known)


def test_a_report_shows_in_the_next_read_without_waiting_for_a_refresh_interval(frozen, gpu_host, report):
    gpu_host("a")
    before = LEDGER.totals(clock.now())
    assert before["cpu_max"] == 10.0
    frozen.shift(0.01)
    report("a", make_snapshot(cpu=70.0))
    assert LEDGER.totals(clock.now())["cpu_max"] == 70.0


def test_between_full_reads_it_reads_only_rows_whose_contact_changed(frozen, gpu_host, report):
    gpu_host("a")
    gpu_host("b")
    LEDGER.totals(clock.now())
    frozen.shift(1)
    LEDGER.totals(clock.now())  # b's contact is now older than this read's overlap
    # A write no instance path makes (the contact untouched): not read until the next full read.
    Instance.objects.filter(pk="b").update(inflight=40)
    frozen.shift(1)
    report("a", make_snapshot(cpu=30.0))
    totals = LEDGER.totals(clock.now())
    assert (totals["cpu_max"], totals["inflight_total"]) == (30.0, None)
    frozen.shift(31)
    report("a")
    report("b")
    assert LEDGER.totals(clock.now())["inflight_total"] == 40


def _row(instance_id, seen=100.0, inflight=1, models=None):
    """A row of ``FIELDS`` as the driver answers it: an instance with a contact and nothing reported."""
    row = dict.fromkeys(FIELDS)
    row.update(instance_id=instance_id, last_seen_at=seen, inflight=inflight, resource__has_raw_resource=True,
               resource__resource_reported_at=seen, resource__engine_count=1, resource__engine_models=models)
    return tuple(row.values())


def test_the_columns_grow_past_their_first_capacity_and_reuse_freed_slots():
    columns = PoolColumns(capacity=2)
    for name in "abcde":
        columns.put_rows([_row(name)])
    assert columns.totals(100.0, 15, 5.0, 0.8)["inflight_total"] == 5
    columns.remove("c")
    columns.put_rows([_row("f")])
    assert len(columns) == 5 and columns.columns.size == 5  # "f" took the slot "c" left
    assert columns.totals(100.0, 15, 5.0, 0.8)["inflight_total"] == 5
    assert columns.totals(120.0, 15, 5.0, 0.8)["alive"] == 0


def test_model_sets_no_instance_holds_any_more_are_forgotten():
    columns = PoolColumns(capacity=2)
    for n in range(300):  # one instance moving through 300 model sets
        columns.put_rows([_row("a", models=f'["m{n}"]'), _row("b", models='["tiny"]')])
    assert len(columns.model_sets) <= 4 * 64 + 1
    assert columns.totals(100.0, 15, 5.0, 0.8)["engine_model_groups"] == [(["m299"], 1, None), (["tiny"], 1, None)]

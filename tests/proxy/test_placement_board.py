"""A web process's placement board refreshes from the rows changed since its last read (SPEC 14.1's fast reads).

The other tests read the whole pool on every request (refresh 0); here the
board keeps what it read for FLEETWATCH_PLACEMENT_REFRESH_S and then reads
only what changed, as it does in a server.
"""

import pytest

from controlplane import clock
from proxy_app.models import Instance
from proxy_app.placement import fence_store
from proxy_app.placement.candidates import BOARD
from proxy_app.placement.inputs import Request
from tests.factories import T0_MS, make_engine, make_snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def refreshing(settings):
    settings.FLEETWATCH_PLACEMENT_REFRESH_S = 0.25


@pytest.fixture
def serve(register_instance, report):
    def _serve(instance_id, waiting=0, register=True):
        if register:
            register_instance(instance_id)
        snapshot = make_snapshot(engines=[make_engine(requests_waiting=waiting, kv_cache_usage_ratio=0.0,
                                                      scraped_at_ms=T0_MS)])
        assert report(instance_id, snapshot).status_code == 200

    return _serve


def first(now, **request):
    return BOARD.decide(Request(count=1, **request), now).ranked[0].candidate.instance_id


def ranking(now):
    return [item.candidate.instance_id for item in BOARD.decide(Request(count=8), now, dry_run=True).ranked]


def test_it_reads_changed_rows_once_the_refresh_interval_has_passed(serve, frozen):
    serve("a", waiting=0)
    serve("b", waiting=3)
    now = clock.now()
    assert ranking(now) == ["a", "b"]
    serve("a", waiting=9, register=False)
    assert ranking(now + 0.1) == ["a", "b"]  # within the interval: what it read
    frozen.shift(0.3)
    assert ranking(clock.now()) == ["b", "a"]  # the changed row read


def test_it_drops_an_unregistered_instance_and_sees_a_new_fence(serve, api, frozen):
    for name in ("a", "b", "c"):
        serve(name)
    assert sorted(ranking(clock.now())) == ["a", "b", "c"]
    api.post("/v1/instance/unregister", {"instance_id": "b"})
    fence_store.feedback("c", "error", clock.now())
    fence_store.feedback("c", "error", clock.now())
    fence_store.feedback("c", "error", clock.now())
    frozen.shift(0.3)
    assert ranking(clock.now()) == ["a"]


def test_it_counts_placements_until_the_next_report_across_refreshes(serve, frozen):
    serve("a")
    serve("b")
    picks = [first(clock.now())]
    frozen.shift(0.3)  # a refresh that brings no new report keeps the count
    picks.append(first(clock.now()))
    assert sorted(picks) == ["a", "b"]
    for name in ("a", "b"):  # new reports: the counts start again
        serve(name, register=False)
    frozen.shift(0.3)
    ranking(clock.now())
    assert BOARD.board.pending_of("a") == BOARD.board.pending_of("b") == 0


def test_a_dry_run_places_nothing(serve):
    serve("a")
    for _ in range(3):
        BOARD.decide(Request(), clock.now(), dry_run=True)
    assert BOARD.board.pending_of("a") == 0


def test_a_full_read_catches_what_no_change_row_announced(serve, frozen):
    serve("a")
    serve("b")
    assert sorted(ranking(clock.now())) == ["a", "b"]
    Instance.objects.filter(pk="b").delete()  # no status-change row: only a full read sees it gone
    frozen.shift(0.3)
    assert sorted(ranking(clock.now())) == ["a", "b"]
    frozen.shift(30)
    assert ranking(clock.now()) == []

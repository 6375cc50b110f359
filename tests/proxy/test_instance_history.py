"""GET /v1/instance/history (SPEC 9)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from controlplane.series.history import as_datetime, typical_step
from proxy_app.models import InstanceMinute
from proxy_app.ops.history import INSTANCES, record_instances
from tests.factories import T0, make_snapshot

pytestmark = pytest.mark.django_db

POINT_KEYS = {"t", "cpu_util", "memory_used_ratio", "gpu_util_avg", "gpu_util_max", "gpu_mem_used_ratio",
              "network_rx_mbps", "network_tx_mbps", "requests_waiting", "requests_running", "kv_cache_usage_ratio",
              "admission_state"}


@pytest.fixture
def reporting(register_instance, report, frozen):
    """i-1 reports once a second for three minutes, cpu = the second within its minute."""

    def _reporting(seconds=180, instance_id="i-1"):
        register_instance(instance_id)
        for second in range(seconds):
            report(instance_id, make_snapshot(cpu=float(second % 60)), seq=second + 1)
            record_instances()
            frozen.shift(1)

    return _reporting


def history(api, **params):
    response = api.get("/v1/instance/history", **params)
    assert response.status_code == 200, response.content
    return response.json()


def test_it_answers_full_resolution_for_15_minutes_oldest_first(api, reporting):
    reporting(seconds=5)
    body = history(api, instance_id="i-1", range="15m")
    assert (body["instance_id"], body["range"], body["resolution_s"]) == ("i-1", "15m", 1.0)
    assert [(p["t"], p["cpu_util"]) for p in body["points"]] == [(T0 + s, float(s)) for s in range(5)]
    assert set(body["points"][0]) == POINT_KEYS
    assert body["points"][0]["memory_used_ratio"] == 0.25


def test_it_answers_minutes_beyond_the_full_window(api, reporting, frozen):
    reporting(seconds=180)
    INSTANCES.fold(T0 + 180)  # folds the minutes of T0 and T0 + 60; T0 + 120 is still running
    body = history(api, instance_id="i-1", range="1h")
    assert body["resolution_s"] == 60
    points = body["points"]
    # Two folded minutes, then the running minute aggregated on the fly.
    assert [p["t"] for p in points] == [T0, T0 + 60, T0 + 120]
    assert [p["cpu_util"] for p in points] == [29.5, 29.5, 29.5]
    assert points[0]["min"]["cpu_util"] == 0.0 and points[0]["max"]["cpu_util"] == 59.0
    assert all(p["admission_state"] == "accepting" for p in points)


def test_it_shows_unfolded_minutes_when_no_fold_ran(api, reporting):
    reporting(seconds=120)
    assert [p["t"] for p in history(api, instance_id="i-1", range="6h")["points"]] == [T0, T0 + 60]


def test_it_merges_minutes_to_stay_under_a_thousand_points_for_24_hours(api, register_instance, frozen):
    register_instance("i-1")
    now = T0 + 24 * 3600  # T0 is a multiple of 120 s: every pair of minutes is one point
    InstanceMinute.objects.bulk_create(
        InstanceMinute(instance_id="i-1", minute=as_datetime(T0 + minute * 60), samples=60,
                       cpu_util_min=float(minute % 2), cpu_util_avg=float(minute % 2), cpu_util_max=float(minute % 2))
        for minute in range(24 * 60)
    )
    frozen.move_to(now)
    body = history(api, instance_id="i-1", range="24h")
    assert body["resolution_s"] == 120
    assert len(body["points"]) == 720
    assert body["points"][0]["t"] == T0 and body["points"][-1]["t"] == now - 120
    # Two minutes per point: cpu 0 and 1 average to 0.5, min 0, max 1.
    assert {p["cpu_util"] for p in body["points"]} == {0.5}
    assert {(p["min"]["cpu_util"], p["max"]["cpu_util"]) for p in body["points"]} == {(0.0, 1.0)}


def test_it_keeps_null_as_null(api, register_instance, report, frozen):
    register_instance("i-1")
    report("i-1", make_snapshot(cpu=None, gpus=()))
    record_instances()
    [point] = history(api, instance_id="i-1", range="15m")["points"]
    assert point["cpu_util"] is None and point["gpu_util_avg"] is None


def test_it_answers_an_empty_series_for_a_known_instance(api, register_instance, frozen):
    register_instance("i-1")
    assert history(api, instance_id="i-1", range="1h")["points"] == []


def test_it_keeps_the_series_of_an_instance_that_left(api, reporting):
    reporting(seconds=3)
    assert api.post("/v1/instance/unregister", {"instance_id": "i-1"}).json() == {"ok": True}
    assert len(history(api, instance_id="i-1", range="15m")["points"]) == 3


@pytest.mark.parametrize("range_name", ["15m", "1h", "6h", "24h"])
def test_it_reads_with_a_constant_number_of_queries(api, reporting, range_name):
    def queries():
        with CaptureQueriesContext(connection) as captured:
            history(api, instance_id="i-1", range=range_name)
        return len(captured)

    reporting(seconds=10)
    few = queries()
    reporting(seconds=170, instance_id="i-2")
    reporting(seconds=170)
    INSTANCES.fold(T0 + 1000)
    assert queries() == few <= 3


@pytest.mark.parametrize("params, field", [
    ({"instance_id": "i-1", "range": "2h"}, "range"),
    ({"instance_id": "i-1", "range": ""}, "range"),
    ({"instance_id": "i-1"}, "range"),
    ({"range": "1h"}, "instance_id"),
    ({"instance_id": "", "range": "1h"}, "instance_id"),
    ({"instance_id": "x" * 300, "range": "1h"}, "instance_id"),
])
def test_it_refuses_bad_queries_with_a_400(api, register_instance, frozen, params, field):
    register_instance("i-1")
    response = api.get("/v1/instance/history", **params)
    assert response.status_code == 400
    body = response.json()
    assert (body["ok"], body["error"], list(body["detail"])) == (False, "validation_error", [field])


def test_it_answers_an_unknown_instance_with_a_404(api, frozen):
    response = api.get("/v1/instance/history", instance_id="ghost", range="1h")
    assert response.status_code == 404
    assert response.json() == {"ok": False, "error": "not_found", "detail": {"instance_id": ["Unknown instance."]}}


def test_the_resolution_is_the_typical_gap_between_the_points():
    every_5s = [{"t": T0 + 5 * i} for i in range(6)]
    assert typical_step(every_5s, 1) == 5.0
    paused = [{"t": t} for t in (T0, T0 + 5, T0 + 10, T0 + 300, T0 + 305)]  # one long pause
    assert typical_step(paused, 1) == 5.0
    assert typical_step([{"t": T0}], 1) == 1.0 and typical_step([], 2) == 2.0  # too few: the tick

"""GET /debug/pool_resource/history (SPEC 9): the recorder's PoolResource rows over time."""

import pytest

from proxy_app.ops.history import POOL, record_pool
from tests.factories import T0, make_snapshot

pytestmark = pytest.mark.django_db

# SPEC 9's keys, and the pool's total and network rates (the pool page charts them).
POINT_KEYS = {"t", "alive", "total", "with_resource", "cpu_avg", "memory_used_ratio", "gpu_util_avg",
              "gpu_mem_used_ratio", "network_rx_mbps_total", "network_tx_mbps_total", "requests_waiting_total",
              "kv_cache_usage_max", "saturation", "pool_admission_state"}


def test_it_answers_the_pool_summaries_oldest_first(api, register_instance, report, frozen, settings):
    settings.FLEETWATCH_PROXY_ID = "pool-a"
    record_pool()  # an empty pool rejects work
    frozen.shift(1)
    register_instance("i-1")
    report("i-1", make_snapshot(cpu=25.0))
    record_pool()
    body = api.get("/debug/pool_resource/history", range="15m").json()
    assert (body["proxy_id"], body["range"], body["resolution_s"]) == ("pool-a", "15m", 1.0)
    first, second = body["points"]
    assert set(first) == POINT_KEYS
    assert (first["t"], first["alive"], first["cpu_avg"], first["pool_admission_state"]) == (T0, 0, None, "rejecting")
    assert (second["t"], second["alive"], second["with_resource"], second["cpu_avg"]) == (T0 + 1, 1, 1, 25.0)
    assert second["pool_admission_state"] == "accepting"
    assert (first["network_rx_mbps_total"], second["network_rx_mbps_total"], second["network_tx_mbps_total"]) == (
        None, 1.0, 2.0)  # an empty pool has no rate, not a zero one


def test_it_answers_minutes_for_longer_ranges(api, register_instance, report, frozen, settings):
    settings.FLEETWATCH_INSTANCE_TTL_S = 3600  # alive for the whole two minutes without heartbeats
    register_instance("i-1")
    report("i-1", make_snapshot(cpu=10.0))
    for _ in range(120):
        record_pool()
        frozen.shift(1)
    POOL.fold(T0 + 125)
    points = api.get("/debug/pool_resource/history", range="1h").json()["points"]
    assert [(p["t"], p["alive"], p["cpu_avg"]) for p in points] == [(T0, 1.0, 10.0), (T0 + 60, 1.0, 10.0)]


@pytest.mark.parametrize("params", [{}, {"range": "7d"}])
def test_it_refuses_a_missing_or_unknown_range(api, params):
    response = api.get("/debug/pool_resource/history", **params)
    assert response.status_code == 400
    assert list(response.json()["detail"]) == ["range"]

"""GET /debug/status, /debug/instance_resources and /debug/instance_loads (SPEC 3)."""

import pytest

from tests.factories import T0, make_gpu, make_snapshot

pytestmark = pytest.mark.django_db

RESOURCE_KEYS_WITHOUT_RAW = {
    "cpu_util", "memory_used_mb", "memory_total_mb", "memory_free_mb", "memory_free_ratio", "gpu_count",
    "gpu_util_avg", "gpu_util_current", "gpu_util_max", "gpu_sample_count", "gpu_sample_age_ms",
    "gpu_sample_source", "gpu_sample_quality", "gpu_sample_window_ms", "gpu_mem_used_mb", "gpu_mem_total_mb",
    "gpu_sample_count_min", "gpu_sample_coverage", "gpu_error_count",
    "network_rx_mbps", "network_tx_mbps",
    "engine_count", "engine_ok_count", "engine_status", "engine_models", "requests_running", "requests_waiting",
    "kv_cache_usage_ratio", "kv_cache_capacity_tokens", "ttft_p95_s", "engine_sample_age_ms", "engine_loras",
    "admission_state", "resource_ts_ms", "resource_reported_at",
    "resource_report_monotonic_ms", "resource_report_wall_time_ms", "reported_instance_id",
    "agent_snapshot_timestamp_ms", "report_seq",
}


@pytest.fixture
def one_stale_one_alive(register_instance, report, instance_heartbeat, frozen):
    register_instance("i-old", host="10.0.0.1", port=8001)
    report("i-old", make_snapshot(cpu=90.0))
    instance_heartbeat("i-old", inflight=9, qps_1m=9.0, gpu_util=90.0)
    frozen.shift(31)
    register_instance("i-new", host="10.0.0.2", port=8002)
    report("i-new", make_snapshot(cpu=20.0, gpus=[make_gpu(0, avg=30.0)]))
    instance_heartbeat("i-new", inflight=2, qps_1m=0.5)


# --- /debug/status -----------------------------------------------------------------------

def test_it_counts_alive_total_and_expired_instances(api, settings, one_stale_one_alive):
    settings.FLEETWATCH_PROXY_ID = "pool-a"
    response = api.get("/debug/status")
    assert response.status_code == 200
    body = response.json()
    assert {"ok", "ttl_s", "alive_instances", "total_instances", "expired_instances", "sample_ids"} <= set(body)
    assert body["ok"] is True
    assert body["ttl_s"] == 30
    assert body["alive_instances"] == 1
    assert body["total_instances"] == 2
    assert body["expired_instances"] == 1
    assert body["sample_ids"] == ["i-new"]  # alive ones only, as the original CLI shows them
    assert body["proxy_id"] == "pool-a"


def test_it_samples_at_most_ten_ids(api, register_instance, frozen):
    for n in range(12):
        register_instance(f"i-{n:02}")
    body = api.get("/debug/status").json()
    assert body["total_instances"] == 12
    assert len(body["sample_ids"]) == 10
    assert set(body["sample_ids"]) <= {f"i-{n:02}" for n in range(12)}


def test_it_reports_an_empty_pool(api, frozen):
    body = api.get("/debug/status").json()
    assert (body["alive_instances"], body["total_instances"], body["expired_instances"]) == (0, 0, 0)
    assert body["sample_ids"] == []


# --- /debug/instance_resources --------------------------------------------------------------

def test_it_shows_resources_of_dead_instances_by_default(api, one_stale_one_alive):
    response = api.get("/debug/instance_resources")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"instances"}
    rows = {row["instance_id"]: row for row in body["instances"]}
    assert set(rows) == {"i-old", "i-new"}
    old = rows["i-old"]
    assert set(old) == {"instance_id", "host", "port", "last_seen_at", "is_alive", "resource"}
    assert (old["host"], old["port"], old["last_seen_at"], old["is_alive"]) == ("10.0.0.1", 8001, T0, False)
    assert set(old["resource"]) == RESOURCE_KEYS_WITHOUT_RAW
    assert old["resource"]["cpu_util"] == 90.0
    new = rows["i-new"]
    assert new["is_alive"] is True
    assert new["last_seen_at"] == T0 + 31
    assert new["resource"]["gpu_util_avg"] == 30.0


def test_it_hides_dead_instance_resources_when_asked(api, one_stale_one_alive):
    rows = api.get("/debug/instance_resources", include_dead="false").json()["instances"]
    assert [row["instance_id"] for row in rows] == ["i-new"]


def test_it_shows_null_resources_before_the_first_snapshot(api, register_instance, frozen):
    register_instance("i-1")
    row = api.get("/debug/instance_resources").json()["instances"][0]
    assert row["resource"] == dict.fromkeys(RESOURCE_KEYS_WITHOUT_RAW)


# --- /debug/instance_loads -------------------------------------------------------------------

def test_it_shows_loads_of_dead_instances_by_default(api, one_stale_one_alive):
    response = api.get("/debug/instance_loads")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"ok", "ttl_s", "generated_at", "metric_source", "instances"}
    assert body["ok"] is True
    assert body["ttl_s"] == 30
    assert body["generated_at"] == T0 + 31
    assert isinstance(body["metric_source"], dict)
    rows = {row["instance_id"]: row for row in body["instances"]}
    assert set(rows) == {"i-old", "i-new"}
    assert {"instance_id", "is_alive", "inflight", "qps_1m"} <= set(rows["i-old"])
    assert rows["i-old"]["is_alive"] is False
    assert (rows["i-old"]["inflight"], rows["i-old"]["qps_1m"]) == (9, 9.0)
    assert rows["i-new"]["is_alive"] is True
    assert (rows["i-new"]["inflight"], rows["i-new"]["qps_1m"]) == (2, 0.5)


def test_it_hides_dead_instance_loads_when_asked(api, one_stale_one_alive):
    rows = api.get("/debug/instance_loads", include_dead="0").json()["instances"]
    assert [row["instance_id"] for row in rows] == ["i-new"]


def test_it_shows_unknown_load_as_null(api, register_instance, frozen):
    register_instance("i-1")
    row = api.get("/debug/instance_loads").json()["instances"][0]
    assert (row["inflight"], row["qps_1m"]) == (None, None)


# --- the original UI's queue keys and least-load score (issue 30, item 4) ----------------------

ORIGINAL_QUEUE_KEYS = {
    "prepare_queue_depth", "ready_queue_depth", "active_prepare", "active_ready", "pending_prefill_count",
    "active_decode_count", "next_slot_ready_in_ms", "prefill_free_in_ms", "predicted_total_backlog_ms",
}
ORIGINAL_WEIGHTS = {
    "inflight": 1.0, "active_prepare": 1.0, "active_ready": 1.0, "prepare_queue_depth": 0.25,
    "ready_queue_depth": 0.25, "pending_prefill_count": 1.0, "active_decode_count": 0.5,
    "predicted_total_backlog_ms": 0.001, "qps_1m": 0.0,
}


def test_it_sends_the_original_uis_queue_keys_as_null_and_says_why(api, one_stale_one_alive):
    body = api.get("/debug/instance_loads").json()
    assert body["metric_source"] == {"inflight": "instance_heartbeat", "qps_1m": "instance_heartbeat",
                                     "queue_depth": "unavailable"}
    for row in body["instances"]:
        assert set(row) == {"instance_id", "is_alive", "inflight", "qps_1m", "gpu_util", "last_seen_at",
                            "least_load_score", *ORIGINAL_QUEUE_KEYS}
        assert {key: row[key] for key in ORIGINAL_QUEUE_KEYS} == dict.fromkeys(ORIGINAL_QUEUE_KEYS)


def test_it_scores_least_load_as_the_original_does_from_known_inputs(api, one_stale_one_alive):
    rows = {row["instance_id"]: row for row in api.get("/debug/instance_loads").json()["instances"]}
    assert rows["i-new"]["least_load_score"] == {
        "total": 2.0,
        "components": {"inflight": 2.0, "qps_1m": 0.5},
        "weighted_components": {"inflight": 2.0},
        "source": {"inflight": "instance_heartbeat", "qps_1m": "instance_heartbeat"},
        "queue_source": "unavailable",
        "weights": ORIGINAL_WEIGHTS,
    }
    assert rows["i-old"]["least_load_score"]["total"] == 9.0


def test_it_scores_a_measured_idle_instance_zero_and_an_unknown_one_null(api, register_instance,
                                                                        instance_heartbeat, frozen):
    register_instance("i-idle")
    instance_heartbeat("i-idle", inflight=0)
    register_instance("i-quiet")
    instance_heartbeat("i-quiet", qps_1m=3.0)
    register_instance("i-silent")
    rows = {row["instance_id"]: row["least_load_score"] for row in api.get("/debug/instance_loads").json()["instances"]}
    assert (rows["i-idle"]["total"], rows["i-idle"]["weighted_components"]) == (0.0, {"inflight": 0.0})
    # qps_1m alone is known but weighs 0: shown, not counted, so the total stays unknown.
    assert (rows["i-quiet"]["total"], rows["i-quiet"]["components"]) == (None, {"qps_1m": 3.0})
    assert (rows["i-silent"]["total"], rows["i-silent"]["components"], rows["i-silent"]["source"]) == (None, {}, {})

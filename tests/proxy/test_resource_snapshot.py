"""POST /v1/instance/resource_snapshot (SPEC 3, 3.1)."""

import pytest

from proxy_app.models import Instance, InstanceResource, InstanceStatusChange
from tests.factories import T0, make_gpu, make_snapshot

pytestmark = [pytest.mark.django_db, pytest.mark.both_entry_points]

RESOURCE_KEYS = {
    "cpu_util", "memory_used_mb", "memory_total_mb", "memory_free_mb", "memory_free_ratio", "gpu_count",
    "gpu_util_avg", "gpu_util_current", "gpu_util_max", "gpu_sample_count", "gpu_sample_age_ms",
    "gpu_sample_source", "gpu_sample_quality", "gpu_sample_window_ms", "gpu_mem_used_mb", "gpu_mem_total_mb",
    "gpu_sample_count_min", "gpu_sample_coverage", "gpu_error_count",
    "network_rx_mbps", "network_tx_mbps",
    "engine_count", "engine_ok_count", "engine_status", "engine_models", "requests_running", "requests_waiting",
    "kv_cache_usage_ratio", "kv_cache_capacity_tokens", "ttft_p95_s", "engine_sample_age_ms", "engine_loras",
    "admission_state", "resource_ts_ms", "resource_reported_at",
    "resource_report_monotonic_ms", "resource_report_wall_time_ms", "reported_instance_id",
    "agent_snapshot_timestamp_ms", "report_seq", "raw_resource",
}


def test_it_accepts_a_snapshot_of_a_known_instance(register_instance, report, frozen):
    register_instance("i-1")
    response = report("i-1")
    assert response.status_code == 200
    assert response.json() == {"ok": True}


def test_it_answers_unknown_instance_with_200_for_compat(report, frozen):
    response = report("i-nobody")
    assert response.status_code == 200
    assert response.json() == {"ok": False, "error": "unknown_instance"}
    assert not InstanceResource.objects.exists()
    assert not Instance.objects.exists()


def test_it_accepts_the_cacheroute_reporter_body_and_lists_it(api, register_instance, frozen, listed_instances):
    register_instance("i-1")
    snapshot = make_snapshot(cpu=12.5, gpus=[make_gpu(0, avg=40.0, peak=90.0)], timestamp_ms=1767225599000)
    body = {
        "instance_id": "i-1",
        "snapshot": snapshot,
        "metadata": {
            "reported_instance_id": "i-1",
            "report_monotonic_ms": 987654,
            "report_wall_time_ms": 1767225599500,
            "agent_snapshot_timestamp_ms": 1767225599000,
        },
    }
    frozen.shift(0.25)
    assert api.post("/v1/instance/resource_snapshot", body).json() == {"ok": True}

    resource = listed_instances()["i-1"]["resource"]
    assert set(resource) == RESOURCE_KEYS
    assert resource["raw_resource"] == snapshot
    assert resource["reported_instance_id"] == "i-1"
    assert resource["resource_report_monotonic_ms"] == 987654
    assert resource["resource_report_wall_time_ms"] == 1767225599500
    assert resource["agent_snapshot_timestamp_ms"] == 1767225599000
    assert resource["resource_ts_ms"] == 1767225599000
    assert resource["resource_reported_at"] == T0 + 0.25
    assert resource["report_seq"] is None
    assert resource["cpu_util"] == 12.5
    assert resource["gpu_count"] == 1
    assert resource["gpu_util_avg"] == 40.0
    assert resource["gpu_util_max"] == 90.0
    assert resource["admission_state"] == "accepting"


def test_it_lists_null_fields_and_an_empty_raw_resource_before_the_first_snapshot(register_instance, frozen, listed_instances):
    register_instance("i-1")
    resource = listed_instances()["i-1"]["resource"]
    assert set(resource) == RESOURCE_KEYS
    assert resource["raw_resource"] == {}
    assert all(resource[key] is None for key in RESOURCE_KEYS - {"raw_resource"})


@pytest.mark.parametrize("metadata", [{}, None, "absent"])
def test_it_defaults_the_metadata(api, register_instance, frozen, listed_instances, metadata):
    register_instance("i-1")
    body = {"instance_id": "i-1", "snapshot": make_snapshot()}
    if metadata != "absent":
        body["metadata"] = metadata
    assert api.post("/v1/instance/resource_snapshot", body).json() == {"ok": True}
    resource = listed_instances()["i-1"]["resource"]
    assert resource["reported_instance_id"] is None
    assert resource["cpu_util"] == 10.0


def test_it_refreshes_last_seen(register_instance, report, frozen):
    register_instance("i-1")
    frozen.shift(3)
    report("i-1")
    assert Instance.objects.get(pk="i-1").last_seen_at == T0 + 3


def test_it_replaces_the_latest_resource(register_instance, report, frozen, listed_instances):
    register_instance("i-1")
    report("i-1", make_snapshot(cpu=10.0))
    frozen.shift(1)
    report("i-1", make_snapshot(cpu=20.0))
    resource = listed_instances()["i-1"]["resource"]
    assert resource["cpu_util"] == 20.0
    assert resource["resource_reported_at"] == T0 + 1
    assert InstanceResource.objects.count() == 1


def test_it_keeps_a_newer_report_over_a_late_reordered_one(register_instance, report, frozen, listed_instances):
    register_instance("i-1")
    assert report("i-1", make_snapshot(cpu=50.0), seq=5).json() == {"ok": True}
    frozen.shift(1)
    response = report("i-1", make_snapshot(cpu=10.0), seq=4)
    assert response.status_code == 200
    assert response.json() == {"ok": True, "stale": True}
    resource = listed_instances()["i-1"]["resource"]
    assert resource["cpu_util"] == 50.0
    assert resource["report_seq"] == 5
    assert resource["resource_reported_at"] == T0


def test_it_keeps_a_newer_report_over_a_late_one_with_an_older_wall_time(register_instance, report, frozen, listed_instances):
    register_instance("i-1")
    report("i-1", make_snapshot(cpu=50.0), seq=5, report_wall_time_ms=1767225600000)
    response = report("i-1", make_snapshot(cpu=10.0), seq=4, report_wall_time_ms=1767225599000)
    assert response.json() == {"ok": True, "stale": True}
    assert listed_instances()["i-1"]["resource"]["cpu_util"] == 50.0


def test_it_applies_a_lower_sequence_with_a_newer_wall_time_after_an_agent_restart(register_instance, report, frozen, listed_instances):
    register_instance("i-1")
    report("i-1", make_snapshot(cpu=50.0), seq=500, report_wall_time_ms=1767225600000)
    frozen.shift(2)
    response = report("i-1", make_snapshot(cpu=10.0), seq=1, report_wall_time_ms=1767225602000)
    assert response.json() == {"ok": True}
    resource = listed_instances()["i-1"]["resource"]
    assert resource["cpu_util"] == 10.0
    assert resource["report_seq"] == 1
    assert resource["resource_report_wall_time_ms"] == 1767225602000


def test_it_applies_a_higher_or_equal_sequence(register_instance, report, frozen, listed_instances):
    register_instance("i-1")
    report("i-1", make_snapshot(cpu=10.0), seq=5)
    assert report("i-1", make_snapshot(cpu=20.0), seq=5).json() == {"ok": True}
    assert listed_instances()["i-1"]["resource"]["cpu_util"] == 20.0
    assert report("i-1", make_snapshot(cpu=30.0), seq=6).json() == {"ok": True}
    assert listed_instances()["i-1"]["resource"]["cpu_util"] == 30.0


def test_it_applies_reports_without_a_sequence(register_instance, report, frozen, listed_instances):
    register_instance("i-1")
    report("i-1", make_snapshot(cpu=10.0), seq=5)
    assert report("i-1", make_snapshot(cpu=20.0)).json() == {"ok": True}
    assert listed_instances()["i-1"]["resource"]["cpu_util"] == 20.0


def test_it_orders_sequences_per_instance(register_instance, report, frozen, listed_instances):
    register_instance("i-1")
    register_instance("i-2")
    report("i-1", make_snapshot(cpu=10.0), seq=100)
    assert report("i-2", make_snapshot(cpu=20.0), seq=1).json() == {"ok": True}
    assert listed_instances()["i-2"]["resource"]["cpu_util"] == 20.0


def test_it_keeps_a_malformed_snapshot_raw_and_nulls_what_it_cannot_read(api, register_instance, frozen, listed_instances):
    register_instance("i-1")
    snapshot = {"devices": {"cpu": {"utilization_pct": "[N/A]"}, "gpu": "none", "network": 5}, "timestamp_ms": "x"}
    assert api.post("/v1/instance/resource_snapshot", {"instance_id": "i-1", "snapshot": snapshot}).json() == {"ok": True}
    resource = listed_instances()["i-1"]["resource"]
    assert resource["raw_resource"] == snapshot
    assert resource["cpu_util"] is None
    assert resource["resource_ts_ms"] is None
    assert resource["gpu_count"] is None


def test_it_shows_gpu_memory_of_a_gpu_less_host_as_null(register_instance, report, frozen, listed_instances):
    register_instance("i-1")
    report("i-1", make_snapshot(gpus=()))
    resource = listed_instances()["i-1"]["resource"]
    assert resource["gpu_mem_used_mb"] is None
    assert resource["gpu_mem_total_mb"] is None
    assert resource["gpu_count"] == 0


def test_it_revives_a_stale_instance_and_records_the_change(register_instance, report, frozen, listed_instances):
    register_instance("i-1")
    frozen.shift(45)
    Instance.objects.sweep(T0 + 45)
    assert "i-1" not in listed_instances()
    assert report("i-1").json() == {"ok": True}
    row = listed_instances()["i-1"]
    assert row["is_alive"] is True
    assert row["status"] == "alive"
    changes = list(InstanceStatusChange.objects.filter(instance_id="i-1").order_by("at", "id")
                   .values_list("old_status", "new_status", "reason"))
    assert changes == [("", "alive", "registered"), ("alive", "suspect", "missed heartbeats"),
                       ("suspect", "stale", "missed heartbeats"), ("stale", "alive", "snapshot")]
    assert Instance.objects.get(pk="i-1").status == "alive"


def test_it_stores_a_snapshot_up_to_the_body_limit(api, register_instance, frozen, listed_instances):
    register_instance("i-1")
    snapshot = make_snapshot(runtime={"padding": "x" * 200_000})
    response = api.post("/v1/instance/resource_snapshot", {"instance_id": "i-1", "snapshot": snapshot})
    assert response.json() == {"ok": True}
    assert listed_instances()["i-1"]["resource"]["raw_resource"]["runtime"]["padding"] == "x" * 200_000


def test_it_stores_moderately_nested_runtime_data_and_non_ascii_text(api, register_instance, frozen, listed_instances):
    register_instance("i-1")
    nested = {"level": 0}
    for level in range(1, 30):
        nested = {"level": level, "inner": nested}
    snapshot = make_snapshot(hostname="gpu-höst-😀", runtime=nested)
    assert api.post("/v1/instance/resource_snapshot", {"instance_id": "i-1", "snapshot": snapshot}).json() == {"ok": True}
    raw = listed_instances()["i-1"]["resource"]["raw_resource"]
    assert raw == snapshot

"""``/debug/pool_resource`` and ``/debug/pool_resource_sources`` over the database (SPEC 5)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import T0, make_gpu, make_snapshot

pytestmark = pytest.mark.django_db

SUMMARY_KEYS = {
    "schema_version", "proxy_id", "generated_at", "ttl_s", "instances", "load", "utilization",
    "resource_freshness_s", "pool_admission_state", "pool_admission_reason", "engine", "metric_source",
    "metric_quality",
}
INSTANCES_KEYS = {"total", "alive", "stale", "with_resource", "missing_resource", "accepting", "degraded", "rejecting"}
LOAD_KEYS = {"inflight_total", "qps_1m_total", "capacity", "load_ratio", "prepare_queue_depth", "ready_queue_depth",
             "queue_pressure"}
UTILIZATION_KEYS = {
    "cpu_avg", "cpu_max", "memory_used_mb", "memory_total_mb", "memory_used_ratio", "memory_free_ratio_min",
    "gpu_util_avg", "gpu_util_max", "gpu_mem_used_mb", "gpu_mem_total_mb", "gpu_mem_used_ratio",
    "network_rx_mbps_total", "network_tx_mbps_total", "gpu_count_total",
}
SOURCE_KEYS = {
    "instances", "resource", "inflight_total", "qps_1m_total", "load_ratio", "capacity", "prepare_queue_depth",
    "ready_queue_depth", "queue_pressure", "utilization", "pool_admission_state", "resource_freshness_s",
    "engine",
}


def test_it_answers_the_shape_of_spec_5(api, frozen, gpu_host):
    gpu_host("i-1")
    response = api.get("/debug/pool_resource")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"ok", "pool_resource"}
    assert body["ok"] is True
    summary = body["pool_resource"]
    assert set(summary) == SUMMARY_KEYS
    assert set(summary["instances"]) == INSTANCES_KEYS
    assert set(summary["load"]) == LOAD_KEYS
    assert set(summary["utilization"]) == UTILIZATION_KEYS
    assert set(summary["resource_freshness_s"]) == {"min", "avg", "max"}
    assert set(summary["metric_source"]) == SOURCE_KEYS
    assert set(summary["metric_quality"]) == {"resource", "load", "queue", "engine"}


def test_it_stamps_the_summary_with_this_proxy(frozen, settings, pool_resource):
    settings.FLEETWATCH_PROXY_ID = "pool-a"
    settings.FLEETWATCH_INSTANCE_TTL_S = 45
    summary = pool_resource()
    assert summary["schema_version"] == 1
    assert summary["proxy_id"] == "pool-a"
    assert summary["generated_at"] == T0
    assert summary["ttl_s"] == 45


def test_it_names_the_proxy_by_its_advertised_address_without_an_id(frozen, settings, pool_resource):
    settings.FLEETWATCH_PROXY_ID = ""
    settings.FLEETWATCH_ADVERTISE_HOST = "10.1.2.3"
    settings.FLEETWATCH_ADVERTISE_PORT = 8002
    assert pool_resource()["proxy_id"] == "hp_10.1.2.3:8002"


def test_it_rejects_with_an_empty_pool(frozen, pool_resource):
    summary = pool_resource()
    assert summary["instances"] == dict.fromkeys(INSTANCES_KEYS, 0)
    assert summary["pool_admission_state"] == "rejecting"
    assert summary["pool_admission_reason"] == "0 accepting, 0 degraded, 0 rejecting, 0 alive"
    assert summary["utilization"] == dict.fromkeys(UTILIZATION_KEYS)
    assert summary["resource_freshness_s"] == {"min": None, "avg": None, "max": None}
    assert summary["load"]["inflight_total"] is None
    assert summary["load"]["qps_1m_total"] is None
    assert summary["load"]["load_ratio"] is None
    assert summary["metric_quality"] == {"resource": "missing", "load": "missing", "queue": "missing", "engine": "missing"}
    assert summary["metric_source"]["utilization"] == "unavailable"


def test_it_rejects_when_every_instance_is_stale(frozen, gpu_host, instance_heartbeat, pool_resource):
    gpu_host("i-1")
    gpu_host("i-2")
    instance_heartbeat("i-1", inflight=3, qps_1m=1.0)
    frozen.shift(30.5)
    summary = pool_resource()
    assert summary["instances"] == {
        "total": 2, "alive": 0, "stale": 2, "with_resource": 0, "missing_resource": 0,
        "accepting": 0, "degraded": 0, "rejecting": 0,
    }
    assert summary["pool_admission_state"] == "rejecting"
    assert summary["utilization"] == dict.fromkeys(UTILIZATION_KEYS)
    assert summary["resource_freshness_s"] == {"min": None, "avg": None, "max": None}
    assert summary["load"]["inflight_total"] is None
    assert summary["metric_source"]["resource"] == "unavailable"


def test_it_still_counts_an_instance_seen_exactly_one_ttl_ago(frozen, gpu_host, pool_resource):
    gpu_host("i-1")
    frozen.shift(30)
    assert pool_resource()["instances"]["alive"] == 1
    frozen.shift(0.01)
    assert pool_resource()["instances"]["alive"] == 0


def test_it_is_degraded_while_some_alive_instances_have_not_reported(frozen, register_instance, gpu_host, pool_resource):
    gpu_host("i-1")
    gpu_host("i-2")
    register_instance("i-3")
    summary = pool_resource()
    assert summary["instances"]["alive"] == 3
    assert summary["instances"]["with_resource"] == 2
    assert summary["instances"]["missing_resource"] == 1
    assert summary["pool_admission_state"] == "degraded"
    assert summary["pool_admission_reason"] == "2 accepting, 0 degraded, 0 rejecting, 3 alive"
    assert summary["metric_quality"]["resource"] == "partial"


def test_it_does_not_count_an_empty_snapshot_as_reporting(api, frozen, register_instance, gpu_host, pool_resource):
    gpu_host("i-1")
    register_instance("i-2")
    response = api.post("/v1/instance/resource_snapshot", {"instance_id": "i-2", "snapshot": {}})
    assert response.json() == {"ok": True}
    summary = pool_resource()
    assert summary["instances"]["with_resource"] == 1
    assert summary["instances"]["missing_resource"] == 1


def test_it_accepts_when_every_alive_instance_reports_accepting(frozen, gpu_host, pool_resource):
    gpu_host("i-1")
    gpu_host("i-2", admission="Accepting")
    summary = pool_resource()
    assert summary["pool_admission_state"] == "accepting"
    assert summary["pool_admission_reason"] == "2 accepting, 0 degraded, 0 rejecting, 2 alive"
    assert summary["metric_quality"]["resource"] == "complete"


def test_it_counts_reporting_instances_by_admission_state(frozen, gpu_host, pool_resource):
    gpu_host("i-1", admission="accepting")
    gpu_host("i-2", admission="degraded")
    gpu_host("i-3", admission="REJECTING")
    gpu_host("i-4", admission="rejecting")
    summary = pool_resource()
    assert summary["instances"]["accepting"] == 1
    assert summary["instances"]["degraded"] == 1
    assert summary["instances"]["rejecting"] == 2
    assert summary["pool_admission_state"] == "degraded"
    assert summary["pool_admission_reason"] == "1 accepting, 1 degraded, 2 rejecting, 4 alive"


def test_it_rejects_when_every_reporting_instance_rejects(frozen, gpu_host, pool_resource):
    gpu_host("i-1", admission="rejecting")
    gpu_host("i-2", admission="rejecting")
    summary = pool_resource()
    assert summary["pool_admission_state"] == "rejecting"
    assert summary["pool_admission_reason"] == "0 accepting, 0 degraded, 2 rejecting, 2 alive"


def test_it_does_not_count_the_admission_of_a_stale_instance(frozen, gpu_host, pool_resource):
    gpu_host("i-old", admission="rejecting")
    frozen.shift(31)
    gpu_host("i-new", admission="accepting")
    summary = pool_resource()
    assert summary["instances"]["rejecting"] == 0
    assert summary["pool_admission_state"] == "accepting"


def test_it_gives_null_gpu_figures_for_hosts_without_gpus(frozen, cpu_host, pool_resource):
    cpu_host("i-1")
    cpu_host("i-2")
    utilization = pool_resource()["utilization"]
    assert utilization["gpu_mem_used_mb"] is None
    assert utilization["gpu_mem_total_mb"] is None
    assert utilization["gpu_mem_used_ratio"] is None
    assert utilization["gpu_util_avg"] is None
    assert utilization["gpu_util_max"] is None
    assert utilization["gpu_count_total"] == 0
    assert utilization["cpu_avg"] == 10.0


def test_it_sums_gpu_memory_only_over_hosts_with_gpus(frozen, cpu_host, gpu_host, pool_resource):
    cpu_host("i-cpu")
    gpu_host("i-gpu", gpus=[make_gpu(0, used=1000.0, total=80000.0), make_gpu(1, used=3000.0, total=80000.0)])
    utilization = pool_resource()["utilization"]
    assert utilization["gpu_mem_used_mb"] == 4000.0
    assert utilization["gpu_mem_total_mb"] == 160000.0
    assert utilization["gpu_mem_used_ratio"] == 0.025
    assert utilization["gpu_count_total"] == 2


def test_it_takes_gpu_util_max_from_per_instance_maxima(frozen, gpu_host, pool_resource):
    gpu_host("i-1", gpus=[make_gpu(0, avg=40.0, peak=97.0), make_gpu(1, avg=60.0, peak=70.0)])
    gpu_host("i-2", gpus=[make_gpu(0, avg=80.0, peak=85.0)])
    utilization = pool_resource()["utilization"]
    assert utilization["gpu_util_max"] == 97.0
    # The mean of per-instance averages (50 and 80), not of the three GPUs.
    assert utilization["gpu_util_avg"] == 65.0


def test_it_sums_and_averages_over_reporting_instances_only(api, frozen, register_instance, gpu_host, instance_heartbeat, pool_resource):
    gpu_host("i-stale", cpu=90.0, used_mb=7000.0, total_mb=8000.0, free_mb=1000.0,
             gpus=[make_gpu(0, avg=99.0, used=70000.0)])
    instance_heartbeat("i-stale", inflight=100, qps_1m=50.0)
    frozen.shift(20)
    gpu_host("i-1", cpu=20.0, used_mb=1000.0, total_mb=4000.0, free_mb=3000.0, gpus=[make_gpu(0, avg=30.0, used=500.0)])
    gpu_host("i-2", cpu=40.0, used_mb=3000.0, total_mb=4000.0, free_mb=1000.0, gpus=[make_gpu(0, avg=50.0, used=1500.0)])
    register_instance("i-silent")
    api.post("/v1/instance/resource_snapshot", {"instance_id": "i-silent", "snapshot": {}})
    instance_heartbeat("i-1", inflight=2, qps_1m=1.5)
    instance_heartbeat("i-silent", inflight=1)
    frozen.shift(15)
    summary = pool_resource()

    assert summary["instances"]["total"] == 4
    assert summary["instances"]["alive"] == 3
    assert summary["instances"]["with_resource"] == 2
    utilization = summary["utilization"]
    assert utilization["cpu_avg"] == 30.0
    assert utilization["cpu_max"] == 40.0
    assert utilization["memory_used_mb"] == 4000.0
    assert utilization["memory_total_mb"] == 8000.0
    assert utilization["memory_used_ratio"] == 0.5
    assert utilization["memory_free_ratio_min"] == 0.25
    assert utilization["gpu_util_avg"] == 40.0
    assert utilization["gpu_util_max"] == 50.0
    assert utilization["gpu_mem_used_mb"] == 2000.0
    assert utilization["gpu_count_total"] == 2
    assert utilization["network_rx_mbps_total"] == 2.0
    assert utilization["network_tx_mbps_total"] == 4.0
    # Load sums over every alive instance that reported it, resource or not.
    assert summary["load"]["inflight_total"] == 3
    assert summary["load"]["qps_1m_total"] == 1.5
    assert summary["metric_quality"]["load"] == "partial"


def test_it_measures_resource_freshness_over_reporting_instances(frozen, gpu_host, report, pool_resource):
    gpu_host("i-1")
    frozen.shift(4)
    gpu_host("i-2")
    frozen.shift(2)
    assert pool_resource()["resource_freshness_s"] == {"min": 2.0, "avg": 4.0, "max": 6.0}
    assert report("i-1").json() == {"ok": True}
    assert pool_resource()["resource_freshness_s"] == {"min": 0.0, "avg": 1.0, "max": 2.0}


def test_it_divides_inflight_by_the_configured_capacity(frozen, settings, gpu_host, instance_heartbeat, pool_resource):
    settings.FLEETWATCH_PROXY_CAPACITY = 8
    gpu_host("i-1")
    gpu_host("i-2")
    instance_heartbeat("i-1", inflight=2, qps_1m=0.5)
    instance_heartbeat("i-2", inflight=4, qps_1m=1.0)
    load = pool_resource()["load"]
    assert load["inflight_total"] == 6
    assert load["qps_1m_total"] == 1.5
    assert load["capacity"] == 8
    assert load["load_ratio"] == 0.75


def test_it_keeps_a_measured_zero_load_apart_from_an_unknown_one(frozen, settings, gpu_host, instance_heartbeat,
                                                                pool_resource):
    settings.FLEETWATCH_PROXY_CAPACITY = 8
    gpu_host("i-1")
    load = pool_resource()["load"]
    assert load["inflight_total"] is None
    assert load["load_ratio"] is None
    instance_heartbeat("i-1", inflight=0, qps_1m=0.0)
    load = pool_resource()["load"]
    assert load["inflight_total"] == 0
    assert load["qps_1m_total"] == 0.0
    assert load["load_ratio"] == 0.0


def test_an_unset_capacity_is_none_declared_in_the_settings_and_the_answer(frozen, gpu_host, instance_heartbeat,
                                                                          pool_resource):
    # Unset, the answer said 8 (the schema: "0 when unset") and load_ratio 1190.375 with 200 hosts busy, while the
    # page said "capacity not configured" (issue 47). This test environment leaves FLEETWATCH_PROXY_CAPACITY unset.
    import os
    import subprocess
    import sys

    from django.conf import settings

    from tests.live import ROOT

    env = {k: v for k, v in os.environ.items() if k != "FLEETWATCH_PROXY_CAPACITY"}
    unset = subprocess.run([sys.executable, "-c", "import django; django.setup(); from django.conf import settings; "
                            "print(settings.FLEETWATCH_PROXY_CAPACITY, settings.FLEETWATCH_PROXY_CAPACITY_CONFIGURED)"],
                           cwd=ROOT, env={**env, "DJANGO_SETTINGS_MODULE": "controlplane.settings"},
                           capture_output=True, text=True, check=True)
    assert unset.stdout.split() == ["0", "False"]
    assert (settings.FLEETWATCH_PROXY_CAPACITY, settings.FLEETWATCH_PROXY_CAPACITY_CONFIGURED) == (0, False)
    gpu_host("i-1")
    instance_heartbeat("i-1", inflight=12)
    load = pool_resource()["load"]
    assert (load["inflight_total"], load["capacity"], load["load_ratio"]) == (12, 0, None)


def test_it_has_no_load_ratio_without_a_capacity(frozen, settings, gpu_host, instance_heartbeat, pool_resource):
    settings.FLEETWATCH_PROXY_CAPACITY = 0
    gpu_host("i-1")
    instance_heartbeat("i-1", inflight=5)
    summary = pool_resource()
    assert summary["load"]["capacity"] == 0
    assert summary["load"]["load_ratio"] is None
    assert summary["metric_source"]["load_ratio"] == "unavailable"


def test_it_explains_where_each_metric_comes_from(api, frozen, gpu_host, instance_heartbeat):
    gpu_host("i-1")
    instance_heartbeat("i-1", inflight=1)
    response = api.get("/debug/pool_resource_sources")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"ok", "metric_source", "metric_quality", "null_semantics"}
    assert body["ok"] is True
    assert body["null_semantics"] == "0 means measured zero; null means unavailable, not wired, or unknown"
    assert set(body["metric_source"]) == SOURCE_KEYS
    assert body["metric_source"]["capacity"] == "proxy_config"
    assert body["metric_source"]["instances"] == "proxy_instance_pool_ttl"
    assert body["metric_source"]["qps_1m_total"] == "unavailable"
    assert body["metric_source"]["inflight_total"] != "unavailable"
    assert body["metric_quality"] == {"resource": "complete", "load": "partial", "queue": "missing", "engine": "missing"}


def test_it_calls_sources_unavailable_for_an_empty_pool(api, frozen):
    body = api.get("/debug/pool_resource_sources").json()
    assert body["metric_source"]["resource"] == "unavailable"
    assert body["metric_source"]["utilization"] == "unavailable"
    assert body["metric_source"]["resource_freshness_s"] == "unavailable"
    assert body["metric_quality"] == {"resource": "missing", "load": "missing", "queue": "missing", "engine": "missing"}


def test_it_computes_the_summary_in_a_constant_number_of_queries(api, frozen, gpu_host, instance_heartbeat):
    def queries_for_pool_resource():
        with CaptureQueriesContext(connection) as captured:
            assert api.get("/debug/pool_resource").status_code == 200
        return len(captured)

    gpu_host("i-0")
    one = queries_for_pool_resource()
    for n in range(1, 25):
        gpu_host(f"i-{n}")
        instance_heartbeat(f"i-{n}", inflight=1)
    assert queries_for_pool_resource() == one


def test_it_needs_two_aggregate_queries_however_large_the_pool(api, frozen, gpu_host, django_assert_max_num_queries):
    for n in range(10):
        gpu_host(f"i-{n}")
    with django_assert_max_num_queries(2):  # instances, then resources of reporting ones
        assert api.get("/debug/pool_resource").status_code == 200


def test_it_ignores_snapshot_values_no_host_could_measure(api, frozen, register_instance, report):
    """Two hosts claiming 1e308 MiB would sum to infinity: such values are dropped as garbage."""
    for n in range(2):
        register_instance(f"i-{n}", port=8000 + n)
        report(f"i-{n}", snapshot=make_snapshot(used_mb=1e308, total_mb=1e308))
    utilization = api.get("/debug/pool_resource").json()["pool_resource"]["utilization"]
    assert utilization["memory_used_mb"] is None
    assert utilization["memory_total_mb"] is None

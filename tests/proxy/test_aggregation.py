"""``build_pool_resource``: every rule of SPEC 5 over plain totals dicts.

No database and no clock: ``totals`` is what ``PoolColumns.totals``
returns, written out by hand.
"""

import pytest

from controlplane.figures import ratio
from proxy_app.pool.aggregation import quality
from proxy_app.pool.answers import build_pool_resource

NOW = 1767225600.0

EMPTY_TOTALS = {
    "total": 0, "alive": 0, "reporting": 0, "accepting": 0, "degraded": 0, "rejecting": 0,
    "inflight_total": None, "inflight_reported": 0, "qps_1m_total": None, "qps_1m_reported": 0,
    "cpu_avg": None, "cpu_max": None, "memory_used_mb": None, "memory_total_mb": None,
    "memory_free_ratio_min": None, "gpu_util_avg": None, "gpu_util_max": None,
    "gpu_mem_used_mb": None, "gpu_mem_total_mb": None, "gpu_count_total": None,
    "network_rx_mbps_total": None, "network_tx_mbps_total": None,
    "reported_at_min": None, "reported_at_avg": None, "reported_at_max": None,
    "instances_with_engine": 0, "instances_engine_ok": 0, "requests_running_total": None,
    "requests_waiting_total": None, "kv_cache_usage_avg": None, "kv_cache_usage_max": None,
    "kv_cache_capacity_tokens_total": None, "ttft_p95_max_s": None, "saturation": None,
    "engine_model_groups": [],
}

REPORTED = {
    "cpu_avg": 30.0, "cpu_max": 50.0, "memory_used_mb": 4000.0, "memory_total_mb": 16000.0,
    "memory_free_ratio_min": 0.6, "gpu_util_avg": 55.0, "gpu_util_max": 97.0,
    "gpu_mem_used_mb": 2000.0, "gpu_mem_total_mb": 160000.0, "gpu_count_total": 2,
    "network_rx_mbps_total": 3.0, "network_tx_mbps_total": 6.0,
    "reported_at_min": NOW - 9.0, "reported_at_avg": NOW - 5.0, "reported_at_max": NOW - 1.0,
}


def pool(capacity=8, **totals):
    return build_pool_resource({**EMPTY_TOTALS, **totals}, now=NOW, ttl_s=30, capacity=capacity, proxy_id="hp_p:1")


def healthy(n=2, **totals):
    """``n`` alive instances, all reporting and accepting, with load."""
    return pool(**{
        "total": n, "alive": n, "reporting": n, "accepting": n,
        "inflight_total": 4, "inflight_reported": n, "qps_1m_total": 1.5, "qps_1m_reported": n,
        **REPORTED, **totals,
    })


# --- shape ----------------------------------------------------------------------

def test_it_answers_the_shape_of_spec_5():
    summary = healthy()
    assert set(summary) == {
        "schema_version", "proxy_id", "generated_at", "ttl_s", "instances", "load", "utilization",
        "resource_freshness_s", "pool_admission_state", "pool_admission_reason", "engine", "metric_source",
        "metric_quality",
    }
    assert set(summary["instances"]) == {
        "total", "alive", "stale", "with_resource", "missing_resource", "accepting", "degraded", "rejecting",
    }
    assert set(summary["load"]) == {
        "inflight_total", "qps_1m_total", "capacity", "load_ratio",
        "prepare_queue_depth", "ready_queue_depth", "queue_pressure",
    }
    assert set(summary["utilization"]) == {
        "cpu_avg", "cpu_max", "memory_used_mb", "memory_total_mb", "memory_used_ratio", "memory_free_ratio_min",
        "gpu_util_avg", "gpu_util_max", "gpu_mem_used_mb", "gpu_mem_total_mb", "gpu_mem_used_ratio",
        "network_rx_mbps_total", "network_tx_mbps_total", "gpu_count_total",
    }
    assert set(summary["resource_freshness_s"]) == {"min", "avg", "max"}
    assert set(summary["metric_source"]) == {
        "instances", "resource", "inflight_total", "qps_1m_total", "load_ratio", "capacity",
        "prepare_queue_depth", "ready_queue_depth", "queue_pressure", "utilization",
        "pool_admission_state", "resource_freshness_s", "engine",
    }
    assert set(summary["metric_quality"]) == {"resource", "load", "queue", "engine"}


def test_it_stamps_the_header():
    summary = healthy()
    assert summary["schema_version"] == 1
    assert summary["proxy_id"] == "hp_p:1"
    assert summary["generated_at"] == NOW
    assert summary["ttl_s"] == 30


# --- instance counts and the admission state --------------------------------------

def test_it_rejects_for_an_empty_pool_and_knows_nothing_else():
    summary = pool()
    assert summary["instances"] == {
        "total": 0, "alive": 0, "stale": 0, "with_resource": 0, "missing_resource": 0,
        "accepting": 0, "degraded": 0, "rejecting": 0,
    }
    assert summary["pool_admission_state"] == "rejecting"
    assert summary["pool_admission_reason"] == "0 accepting, 0 degraded, 0 rejecting, 0 alive"
    assert all(value is None for value in summary["utilization"].values())
    assert summary["resource_freshness_s"] == {"min": None, "avg": None, "max": None}
    assert summary["load"]["inflight_total"] is None
    assert summary["load"]["qps_1m_total"] is None
    assert summary["load"]["load_ratio"] is None
    assert summary["metric_quality"] == {"resource": "missing", "load": "missing", "queue": "missing", "engine": "missing"}


def test_it_rejects_when_every_instance_is_stale():
    summary = pool(total=3, alive=0)
    assert summary["instances"]["stale"] == 3
    assert summary["instances"]["alive"] == 0
    assert summary["pool_admission_state"] == "rejecting"
    assert summary["pool_admission_reason"] == "0 accepting, 0 degraded, 0 rejecting, 0 alive"


def test_it_counts_stale_as_total_minus_alive():
    summary = healthy(total=5)
    assert summary["instances"]["stale"] == 3


def test_it_counts_alive_instances_without_a_resource_as_missing():
    summary = healthy(n=2, total=3, alive=3)
    assert summary["instances"]["with_resource"] == 2
    assert summary["instances"]["missing_resource"] == 1


def test_it_accepts_when_every_alive_instance_reports_accepting():
    summary = healthy(n=3)
    assert summary["pool_admission_state"] == "accepting"
    assert summary["pool_admission_reason"] == "3 accepting, 0 degraded, 0 rejecting, 3 alive"


def test_it_rejects_when_every_reporting_instance_rejects_and_none_is_missing():
    summary = healthy(n=2, accepting=0, rejecting=2)
    assert summary["pool_admission_state"] == "rejecting"
    assert summary["pool_admission_reason"] == "0 accepting, 0 degraded, 2 rejecting, 2 alive"


def test_it_is_only_degraded_when_all_reporting_reject_but_one_is_missing_its_resource():
    summary = healthy(n=2, total=3, alive=3, accepting=0, rejecting=2)
    assert summary["instances"]["missing_resource"] == 1
    assert summary["pool_admission_state"] == "degraded"


def test_it_is_degraded_when_one_instance_is_degraded():
    summary = healthy(n=3, accepting=2, degraded=1)
    assert summary["instances"]["degraded"] == 1
    assert summary["pool_admission_state"] == "degraded"
    assert summary["pool_admission_reason"] == "2 accepting, 1 degraded, 0 rejecting, 3 alive"


def test_it_is_degraded_when_some_but_not_all_reject():
    summary = healthy(n=3, accepting=1, rejecting=2)
    assert summary["pool_admission_state"] == "degraded"
    assert summary["pool_admission_reason"] == "1 accepting, 0 degraded, 2 rejecting, 3 alive"


def test_it_is_degraded_when_an_alive_instance_has_not_reported():
    summary = healthy(n=2, total=3, alive=3)
    assert summary["pool_admission_state"] == "degraded"


def test_it_is_degraded_when_no_alive_instance_has_reported():
    summary = pool(total=2, alive=2)
    assert summary["instances"]["missing_resource"] == 2
    assert summary["pool_admission_state"] == "degraded"
    assert summary["pool_admission_reason"] == "0 accepting, 0 degraded, 0 rejecting, 2 alive"


def test_it_accepts_when_a_reporting_instance_states_no_admission():
    # Two report, one says accepting and one says nothing: no rule matches
    # before the last.
    summary = healthy(n=2, accepting=1)
    assert summary["pool_admission_state"] == "accepting"
    assert summary["pool_admission_reason"] == "1 accepting, 0 degraded, 0 rejecting, 2 alive"


# --- load --------------------------------------------------------------------------

def test_it_divides_inflight_by_capacity():
    summary = healthy(inflight_total=6, capacity=8)
    assert summary["load"]["capacity"] == 8
    assert summary["load"]["load_ratio"] == 0.75
    assert summary["metric_source"]["load_ratio"] != "unavailable"


@pytest.mark.parametrize("capacity", [0, -4, None])
def test_it_has_no_load_ratio_without_a_positive_capacity(capacity):
    summary = healthy(capacity=capacity)
    assert summary["load"]["load_ratio"] is None
    assert summary["load"]["capacity"] == (0 if capacity is None else capacity)
    assert summary["metric_source"]["load_ratio"] == "unavailable"


def test_it_has_no_load_ratio_without_inflight():
    summary = healthy(inflight_total=None, inflight_reported=0)
    assert summary["load"]["inflight_total"] is None
    assert summary["load"]["load_ratio"] is None
    assert summary["metric_source"]["inflight_total"] == "unavailable"
    assert summary["metric_source"]["load_ratio"] == "unavailable"


def test_it_keeps_a_measured_zero_inflight():
    summary = healthy(inflight_total=0, qps_1m_total=0.0)
    assert summary["load"]["inflight_total"] == 0
    assert summary["load"]["qps_1m_total"] == 0.0
    assert summary["load"]["load_ratio"] == 0.0
    assert summary["metric_source"]["inflight_total"] != "unavailable"
    assert summary["metric_source"]["qps_1m_total"] != "unavailable"


def test_it_hands_inflight_over_as_an_int():
    # Databases return SUM of a bigint as Decimal or int depending on backend.
    summary = healthy(inflight_total=4.0)
    assert summary["load"]["inflight_total"] == 4
    assert isinstance(summary["load"]["inflight_total"], int)


def test_it_has_no_request_queue():
    load = healthy()["load"]
    assert load["prepare_queue_depth"] is None
    assert load["ready_queue_depth"] is None
    assert load["queue_pressure"] is None


# --- utilization --------------------------------------------------------------------

def test_it_passes_the_aggregates_through_and_computes_the_ratios():
    utilization = healthy()["utilization"]
    assert utilization == {
        "cpu_avg": 30.0, "cpu_max": 50.0, "memory_used_mb": 4000.0, "memory_total_mb": 16000.0,
        "memory_used_ratio": 0.25, "memory_free_ratio_min": 0.6, "gpu_util_avg": 55.0, "gpu_util_max": 97.0,
        "gpu_mem_used_mb": 2000.0, "gpu_mem_total_mb": 160000.0, "gpu_mem_used_ratio": 0.0125,
        "network_rx_mbps_total": 3.0, "network_tx_mbps_total": 6.0, "gpu_count_total": 2,
    }


def test_it_has_no_ratio_over_a_zero_denominator():
    utilization = healthy(memory_total_mb=0.0, gpu_mem_total_mb=0.0)["utilization"]
    assert utilization["memory_used_ratio"] is None
    assert utilization["gpu_mem_used_ratio"] is None


def test_it_has_no_ratio_over_a_missing_input():
    utilization = healthy(memory_used_mb=None, gpu_mem_used_mb=None, gpu_mem_total_mb=None)["utilization"]
    assert utilization["memory_used_ratio"] is None
    assert utilization["gpu_mem_used_ratio"] is None
    assert utilization["gpu_mem_used_mb"] is None


def test_it_keeps_a_zero_numerator_ratio_at_zero():
    assert healthy(gpu_mem_used_mb=0.0)["utilization"]["gpu_mem_used_ratio"] == 0.0


@pytest.mark.parametrize(("numerator", "denominator", "expected"), [(1, 4, 0.25), (0, 4, 0.0), (1, 0, None), (None, 4, None), (1, None, None)])
def test_it_divides_only_what_can_be_divided(numerator, denominator, expected):
    assert ratio(numerator, denominator) == expected


def test_it_measures_freshness_from_now():
    freshness = healthy()["resource_freshness_s"]
    assert freshness == {"min": 1.0, "avg": 5.0, "max": 9.0}


def test_a_report_stamped_after_the_summarys_now_is_fresh_not_negative():
    # Another web process stamped it 40 ms after this summary took its now.
    freshness = healthy(reported_at_max=NOW + 0.04, reported_at_avg=NOW + 0.02)["resource_freshness_s"]
    assert freshness == {"min": 0.0, "avg": 0.0, "max": 9.0}


# --- metric_source and metric_quality ------------------------------------------------

def test_it_labels_every_source_of_a_healthy_pool():
    sources = healthy()["metric_source"]
    assert sources["instances"] == "proxy_instance_pool_ttl"
    assert sources["capacity"] == "proxy_config"
    for key in ("resource", "inflight_total", "qps_1m_total", "load_ratio", "utilization",
                "pool_admission_state", "resource_freshness_s"):
        assert sources[key] != "unavailable", key
        assert isinstance(sources[key], str) and sources[key]
    for key in ("prepare_queue_depth", "ready_queue_depth", "queue_pressure"):
        assert sources[key] == "unavailable"


def test_it_calls_every_data_source_unavailable_for_an_empty_pool():
    sources = pool()["metric_source"]
    for key in ("resource", "inflight_total", "qps_1m_total", "load_ratio", "utilization",
                "resource_freshness_s", "prepare_queue_depth", "ready_queue_depth", "queue_pressure"):
        assert sources[key] == "unavailable", key
    # Never null, so always labelled.
    assert sources["instances"] == "proxy_instance_pool_ttl"
    assert sources["capacity"] == "proxy_config"
    assert sources["pool_admission_state"] != "unavailable"


@pytest.mark.parametrize(
    ("present", "expected", "answer"),
    [(0, 0, "missing"), (3, 0, "missing"), (0, 3, "missing"), (-1, 3, "missing"), (1, 3, "partial"),
     (2, 3, "partial"), (3, 3, "complete"), (4, 3, "complete")],
)
def test_it_grades_coverage(present, expected, answer):
    assert quality(present, expected) == answer


def test_it_grades_resource_coverage_over_alive_instances():
    assert healthy(n=2)["metric_quality"]["resource"] == "complete"
    assert healthy(n=2, total=3, alive=3)["metric_quality"]["resource"] == "partial"
    assert pool(total=2, alive=2)["metric_quality"]["resource"] == "missing"


def test_it_grades_load_coverage_over_two_fields_per_alive_instance():
    assert healthy(n=2, inflight_reported=2, qps_1m_reported=2)["metric_quality"]["load"] == "complete"
    assert healthy(n=2, inflight_reported=2, qps_1m_reported=1)["metric_quality"]["load"] == "partial"
    assert healthy(n=2, inflight_reported=1, qps_1m_reported=0)["metric_quality"]["load"] == "partial"
    summary = healthy(n=2, inflight_total=None, inflight_reported=0, qps_1m_total=None, qps_1m_reported=0)
    assert summary["metric_quality"]["load"] == "missing"


def test_it_always_grades_the_queue_missing():
    assert healthy()["metric_quality"]["queue"] == "missing"


# --- the engine section (SPEC 13) -------------------------------------------------------


def test_it_has_an_engine_section_of_nulls_without_engines():
    summary = healthy()
    assert summary["engine"] == {
        "instances_with_engine": 0, "requests_running_total": None, "requests_waiting_total": None,
        "kv_cache_usage_avg": None, "kv_cache_usage_max": None, "kv_cache_capacity_tokens_total": None,
        "ttft_p95_max_s": None, "saturation": None, "models": None,
    }
    assert summary["metric_source"]["engine"] == "unavailable"
    assert summary["metric_quality"]["engine"] == "missing"


def test_it_passes_the_engine_totals_through_and_grades_them_over_alive_instances():
    summary = healthy(
        n=4, instances_with_engine=3, instances_engine_ok=2, requests_running_total=8, requests_waiting_total=11,
        kv_cache_usage_avg=0.5, kv_cache_usage_max=0.9, kv_cache_capacity_tokens_total=65536,
        ttft_p95_max_s=1.25, saturation=0.75, engine_model_groups=[(["tiny"], 2, 11), (["big", "tiny"], 1, None)],
    )
    engine = summary["engine"]
    assert engine["instances_with_engine"] == 3
    assert (engine["requests_running_total"], engine["requests_waiting_total"]) == (8, 11)
    assert (engine["kv_cache_usage_avg"], engine["kv_cache_usage_max"]) == (0.5, 0.9)
    assert (engine["kv_cache_capacity_tokens_total"], engine["ttft_p95_max_s"], engine["saturation"]) == (
        65536, 1.25, 0.75)
    assert engine["models"] == [
        {"model": "tiny", "instances": 3, "requests_waiting_total": 11},
        {"model": "big", "instances": 1, "requests_waiting_total": None},
    ]
    assert summary["metric_source"]["engine"] == "agent_engine_scrape"
    assert summary["metric_quality"]["engine"] == "partial"
    # The compat queue keys keep their meaning: this project has no request queue of its own.
    assert summary["load"]["prepare_queue_depth"] is None and summary["metric_quality"]["queue"] == "missing"


def test_it_calls_the_engine_source_unavailable_when_no_engine_is_ok():
    summary = healthy(n=2, instances_with_engine=2, instances_engine_ok=0, engine_model_groups=[(["tiny"], 2, None)])
    assert summary["metric_source"]["engine"] == "unavailable"
    assert summary["metric_quality"]["engine"] == "missing"
    assert summary["engine"]["models"] == [{"model": "tiny", "instances": 2, "requests_waiting_total": None}]


def test_it_hands_the_engine_counts_over_as_ints():
    # The columns' sums are floats; the schema says these are integers.
    summary = healthy(n=2, instances_with_engine=2.0, instances_engine_ok=2, requests_running_total=3.0,
                      requests_waiting_total=9.0, kv_cache_capacity_tokens_total=4096.0, saturation=0.5,
                      engine_model_groups=[(["tiny"], 2, 9.0)])
    engine = summary["engine"]
    for key in ("instances_with_engine", "requests_running_total", "requests_waiting_total",
                "kv_cache_capacity_tokens_total"):
        assert isinstance(engine[key], int), key
    assert engine["models"] == [{"model": "tiny", "instances": 2, "requests_waiting_total": 9}]
    assert isinstance(engine["models"][0]["requests_waiting_total"], int)

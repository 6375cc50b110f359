"""controlplane.series.pool_summary: series figures read out of a summary stored as sent."""

from controlplane.series.pool_summary import summary_columns
from tests.factories import make_pool_resource


def test_it_reads_the_figures_of_a_spec_summary():
    summary = make_pool_resource(alive=3, total=5, cpu=1.5, gpu=0.0, memory_used_ratio=0.5, admission="Degraded")
    summary["instances"]["with_resource"] = 2
    summary["utilization"].update(gpu_mem_used_ratio=0.75, network_rx_mbps_total=1200.5, network_tx_mbps_total=0)
    summary["engine"] = {"requests_waiting_total": 12, "kv_cache_usage_max": 0.5, "saturation": 0.25}

    assert summary_columns(summary) == {
        "alive": 3, "total": 5, "with_resource": 2, "cpu_avg": 1.5, "memory_used_ratio": 0.5,
        "gpu_util_avg": 0.0, "gpu_mem_used_ratio": 0.75, "network_rx_mbps_total": 1200.5,
        "network_tx_mbps_total": 0.0, "requests_waiting_total": 12.0, "kv_cache_usage_max": 0.5, "saturation": 0.25,
        "pool_admission_state": "degraded",
    }


def test_a_summary_without_an_engine_section_has_no_engine_figures():
    columns = summary_columns(make_pool_resource())
    assert (columns["requests_waiting_total"], columns["kv_cache_usage_max"], columns["saturation"]) == (
        None, None, None)


def test_it_gives_none_for_anything_that_is_not_a_usable_figure():
    summary = {
        "instances": {"alive": True, "total": 2.5, "with_resource": -1},
        "utilization": {"cpu_avg": "12", "gpu_util_avg": float("nan"), "memory_used_ratio": None,
                        "gpu_mem_used_ratio": [0.5], "network_rx_mbps_total": "1", "network_tx_mbps_total": float("inf")},
        "engine": {"requests_waiting_total": "8", "kv_cache_usage_max": True, "saturation": float("nan")},
        "pool_admission_state": 7,
    }

    assert set(summary_columns(summary).values()) == {None}


def test_it_survives_summaries_of_any_shape():
    for summary in ({}, {"instances": [1, 2]}, {"utilization": "high"}, {"instances": {"alive": 10**30}}, None, []):
        assert summary_columns(summary)["alive"] is None


def test_it_takes_an_integral_float_count_as_a_count():
    assert summary_columns({"instances": {"alive": 4.0}})["alive"] == 4

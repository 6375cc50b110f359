"""``normalise_snapshot``'s GPU columns (SPEC 3.1): which GPUs count, their utilisation, memory and samples.

A pure function: no database, no clock.
"""

import pytest

from tests.factories import make_gpu, make_snapshot
from tests.proxy.test_normalise import normalise, with_gpus

# --- valid and invalid GPUs -----------------------------------------------------

def test_it_counts_and_averages_valid_gpus():
    columns = normalise(with_gpus(make_gpu(0, avg=40.0), make_gpu(1, avg=60.0)))
    assert columns["gpu_count"] == 2
    assert columns["gpu_util_avg"] == 50.0
    assert columns["gpu_sample_quality"] == "ok"


def test_it_leaves_out_a_gpu_whose_sample_is_not_ok():
    columns = normalise(with_gpus(make_gpu(0, avg=40.0), make_gpu(1, avg=100.0, ok=False)))
    assert columns["gpu_count"] == 1
    assert columns["gpu_util_avg"] == 40.0
    assert columns["gpu_util_max"] == 40.0
    assert columns["gpu_util_current"] == 40.0
    # Some valid GPU gave a utilisation: the compat quality is ok; ours says partial.
    assert columns["gpu_sample_quality"] == "ok"
    assert columns["gpu_sample_coverage"] == "partial"


@pytest.mark.parametrize(
    "quality",
    ["invalid", "failed", "error", "command_error", "parse_error", "unsupported",
     "INVALID", "Failed", "ERROR", "Command_Error", "PARSE_ERROR", " Unsupported "],
)
@pytest.mark.parametrize("key", ["utilization_sample_quality", "sample_quality", "quality"])
def test_it_leaves_out_a_gpu_with_a_bad_quality_in_any_case(quality, key):
    bad = make_gpu(1, avg=100.0, **{key: quality})
    columns = normalise(with_gpus(make_gpu(0, avg=20.0), bad))
    assert columns["gpu_count"] == 1
    assert columns["gpu_util_avg"] == 20.0


@pytest.mark.parametrize("quality", ["ok", "good", "estimated", ""])
def test_it_keeps_a_gpu_with_another_quality(quality):
    columns = normalise(with_gpus(make_gpu(0, avg=20.0), make_gpu(1, avg=40.0, utilization_sample_quality=quality)))
    assert columns["gpu_count"] == 2
    assert columns["gpu_util_avg"] == 30.0


def test_it_counts_no_valid_gpu_when_every_sample_failed():
    columns = normalise(with_gpus(make_gpu(0, ok=False), make_gpu(1, quality="failed")))
    assert columns["gpu_count"] == 0
    assert columns["gpu_util_avg"] is None
    assert columns["gpu_util_max"] is None
    assert columns["gpu_util_current"] is None
    # No valid utilisation: the first row's own word, else null; ours says invalid.
    assert columns["gpu_sample_quality"] is None
    assert columns["gpu_sample_coverage"] == "invalid"


# --- gpu_util_avg, gpu_util_current and gpu_util_max -----------------------------

AVG_KEYS = ["utilization_pct_avg", "utilization_pct", "utilization_gpu_pct", "gpu_util", "util"]


@pytest.mark.parametrize("position", range(len(AVG_KEYS)))
def test_it_falls_back_through_the_average_keys_in_order(position):
    # The GPU carries this key and every later one, each with its own value.
    gpu = {key: float(10 * (i + 1)) for i, key in enumerate(AVG_KEYS) if i >= position}
    assert normalise(with_gpus(gpu))["gpu_util_avg"] == float(10 * (position + 1))


def test_it_skips_an_average_key_whose_value_is_not_a_number():
    gpu = {"utilization_pct_avg": "[N/A]", "utilization_pct": None, "utilization_gpu_pct": "33"}
    assert normalise(with_gpus(gpu))["gpu_util_avg"] == 33.0


def test_it_averages_only_gpus_that_report_a_utilisation():
    gpus = [make_gpu(0, avg=80.0), {"index": 1, "memory_used_mb": 10.0}]
    columns = normalise(with_gpus(*gpus))
    assert columns["gpu_count"] == 2
    assert columns["gpu_util_avg"] == 80.0


def test_it_averages_the_current_utilisation():
    columns = normalise(with_gpus(make_gpu(0, avg=50.0, current=10.0), make_gpu(1, avg=50.0, current=30.0)))
    assert columns["gpu_util_current"] == 20.0


def test_it_takes_the_max_over_gpus_of_their_window_maxima():
    columns = normalise(with_gpus(make_gpu(0, avg=50.0, peak=97.0), make_gpu(1, avg=70.0, peak=80.0)))
    assert columns["gpu_util_avg"] == 60.0
    assert columns["gpu_util_max"] == 97.0


def test_it_falls_back_to_a_gpu_average_when_it_has_no_maximum():
    no_peak = make_gpu(1, avg=95.0)
    del no_peak["utilization_pct_max"]
    columns = normalise(with_gpus(make_gpu(0, avg=50.0, peak=90.0), no_peak))
    assert columns["gpu_util_max"] == 95.0


def test_it_falls_back_to_the_average_when_the_maximum_is_not_a_number():
    columns = normalise(with_gpus(make_gpu(0, avg=45.0, utilization_pct_max="n/a")))
    assert columns["gpu_util_max"] == 45.0


# --- the sample fields, as the original derives them (SPEC 3.1) ---------------------

SNAPSHOT_MS = 1767225600000


def test_it_sums_the_sample_counts_of_every_gpu_row_valid_or_not():
    gpus = [make_gpu(0, utilization_sample_count=5), make_gpu(1, utilization_sample_count=3),
            make_gpu(2, utilization_sample_count=0, ok=False)]
    columns = normalise(with_gpus(*gpus))
    assert columns["gpu_sample_count"] == 8
    # Ours: the weakest valid GPU.
    assert columns["gpu_sample_count_min"] == 3


def test_it_counts_a_sample_count_of_zero_as_zero():
    assert normalise(with_gpus(make_gpu(0, utilization_sample_count=0)))["gpu_sample_count"] == 0


def test_it_gives_a_null_sample_count_when_no_row_has_one():
    gpu = make_gpu(0)
    del gpu["utilization_sample_count"]
    assert normalise(with_gpus(gpu))["gpu_sample_count"] is None


def test_it_ages_the_newest_gpu_sample_against_the_snapshot_time():
    gpus = [make_gpu(0, utilization_sample_timestamp_ms=SNAPSHOT_MS - 900),
            make_gpu(1, utilization_sample_timestamp_ms=SNAPSHOT_MS - 250, ok=False)]
    assert normalise(with_gpus(*gpus))["gpu_sample_age_ms"] == 250


def test_it_never_gives_a_negative_sample_age():
    gpus = [make_gpu(0, utilization_sample_timestamp_ms=SNAPSHOT_MS + 40)]
    assert normalise(with_gpus(*gpus))["gpu_sample_age_ms"] == 0


def test_it_gives_a_null_sample_age_when_a_timestamp_is_missing():
    assert normalise(with_gpus(make_gpu(0)))["gpu_sample_age_ms"] is None
    snapshot = with_gpus(make_gpu(0, utilization_sample_timestamp_ms=SNAPSHOT_MS))
    del snapshot["timestamp_ms"]
    assert normalise(snapshot)["gpu_sample_age_ms"] is None


def test_it_takes_the_largest_window_and_the_first_non_empty_source():
    gpus = [make_gpu(0, utilization_window_ms=4000, utilization_source=""),
            make_gpu(1, utilization_window_ms=5000, utilization_source="nvidia-smi"),
            make_gpu(2, utilization_window_ms=1000, utilization_source="nvml")]
    columns = normalise(with_gpus(*gpus))
    assert columns["gpu_sample_window_ms"] == 5000
    assert columns["gpu_sample_source"] == "nvidia-smi"


def test_it_reads_the_placeholder_row_of_a_gpu_less_host_as_the_original_does():
    """The original agent on a host without GPUs sends one row saying nvidia-smi failed."""
    placeholder = {
        "index": None, "utilization_pct": None, "utilization_sample_ok": False,
        "utilization_sample_quality": "command_error", "utilization_source": "nvidia-smi",
        "utilization_window_ms": 5000, "utilization_sample_count": 0, "utilization_sample_timestamp_ms": None,
        "utilization_error": "nvidia-smi: command not found", "memory_used_mb": None, "memory_total_mb": None,
    }
    columns = normalise(with_gpus(placeholder))
    assert columns["gpu_count"] == 0
    assert columns["gpu_sample_quality"] == "command_error"
    assert columns["gpu_sample_source"] == "nvidia-smi"
    assert columns["gpu_sample_window_ms"] == 5000
    assert columns["gpu_sample_count"] == 0
    assert columns["gpu_sample_age_ms"] is None
    assert columns["gpu_mem_used_mb"] is None and columns["gpu_mem_total_mb"] is None
    assert columns["gpu_sample_coverage"] == "invalid"


def test_it_calls_the_quality_ok_when_the_first_row_only_says_its_sample_is_ok():
    gpu = {"index": 0, "utilization_sample_ok": True}
    assert normalise(with_gpus(gpu))["gpu_sample_quality"] == "ok"


# --- GPU memory, gpu_count and GPU-less hosts ------------------------------------

def test_it_sums_gpu_memory_over_gpus_that_report_it():
    gpus = [make_gpu(0, used=1000.0, total=80000.0), make_gpu(1, used=None, total=None), make_gpu(2, used=500.0, total=40000.0)]
    columns = normalise(with_gpus(*gpus))
    assert columns["gpu_mem_used_mb"] == 1500.0
    assert columns["gpu_mem_total_mb"] == 120000.0


def test_it_gives_null_gpu_memory_for_a_host_without_gpus():
    columns = normalise(make_snapshot(gpus=()))
    assert columns["gpu_mem_used_mb"] is None
    assert columns["gpu_mem_total_mb"] is None
    assert columns["gpu_count"] == 0
    assert columns["gpu_util_avg"] is None
    assert columns["gpu_util_max"] is None
    assert columns["gpu_sample_quality"] is None
    assert columns["gpu_sample_coverage"] is None
    assert columns["gpu_sample_count"] is None


def test_it_gives_null_gpu_memory_when_no_gpu_reports_it():
    columns = normalise(with_gpus(make_gpu(0, used=None, total="[N/A]")))
    assert columns["gpu_mem_used_mb"] is None
    assert columns["gpu_mem_total_mb"] is None
    assert columns["gpu_count"] == 1


def test_it_does_not_know_the_gpu_count_without_a_gpu_list():
    snapshot = make_snapshot()
    del snapshot["devices"]["gpu"]
    columns = normalise(snapshot)
    assert columns["gpu_count"] is None
    assert columns["gpu_mem_used_mb"] is None

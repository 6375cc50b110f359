"""``normalise_snapshot``: an agent snapshot into the columns of SPEC 3.1.

A pure function: no database, no clock.
"""

import pytest

from proxy_app.ingest.normalise import RESOURCE_FIELDS, normalise_snapshot

# The SPEC 3.1 fields, the snapshot as sent, and kv_events_ok_count: stored for placement's learned mode
# (SPEC 15.5), not shown as a 3.1 field.
NORMALISED = {*RESOURCE_FIELDS, "raw_resource", "kv_events_ok_count", "adapter_parents"}
from tests.factories import T0, make_gpu, make_snapshot


def normalise(snapshot=None, metadata=None, received_at=T0):
    return normalise_snapshot(make_snapshot() if snapshot is None else snapshot, metadata or {}, received_at)


def with_cpu(value):
    snapshot = make_snapshot()
    snapshot["devices"]["cpu"]["utilization_pct"] = value
    return snapshot


def with_gpus(*gpus):
    return make_snapshot(gpus=gpus)


# --- strict numbers -------------------------------------------------------------

@pytest.mark.parametrize(
    "value",
    [
        None, True, False, [], [12.5], {}, {"value": 1}, "", "   ",
        "n/a", "N/A", "[N/A]", "[n/a]", "Not Supported", "NOT SUPPORTED", "[not supported]", "[Not Supported]",
        "nan", "NaN", "inf", "-inf", "Infinity", "abc", "12.5%",
        float("nan"), float("inf"), float("-inf"), 10**400,
    ],
)
def test_it_reads_anything_that_is_not_a_finite_number_as_null(value):
    assert normalise(with_cpu(value))["cpu_util"] is None


@pytest.mark.parametrize(("value", "expected"), [("12.5", 12.5), (" 7 ", 7.0), ("0", 0.0), (0, 0.0), (12, 12.0), (99.9, 99.9)])
def test_it_accepts_numbers_and_numeric_strings(value, expected):
    cpu = normalise(with_cpu(value))["cpu_util"]
    assert cpu == expected
    assert isinstance(cpu, float)


def test_it_keeps_a_measured_zero_as_zero():
    columns = normalise(make_snapshot(cpu=0.0, gpus=[make_gpu(avg=0.0, used=0.0)]))
    assert columns["cpu_util"] == 0.0
    assert columns["gpu_util_avg"] == 0.0
    assert columns["gpu_util_max"] == 0.0
    assert columns["gpu_mem_used_mb"] == 0.0


@pytest.mark.parametrize("huge", [2**63, 10**30, -(2**64), 1e300])
def test_it_reads_integers_too_big_for_a_bigint_column_as_null(huge):
    columns = normalise(make_snapshot(timestamp_ms=huge), {"report_seq": huge, "report_wall_time_ms": huge})
    assert columns["resource_ts_ms"] is None
    assert columns["report_seq"] is None
    assert columns["resource_report_wall_time_ms"] is None


def test_it_reads_integer_columns_from_numeric_strings():
    columns = normalise(make_snapshot(timestamp_ms="1767225600000"), {"report_seq": "42"})
    assert columns["resource_ts_ms"] == 1767225600000
    assert columns["report_seq"] == 42


# --- CPU, memory, network ---------------------------------------------------------

def test_it_reads_cpu_and_memory():
    columns = normalise(make_snapshot(cpu=12.5, used_mb=3000.0, total_mb=12000.0, free_mb=9000.0))
    assert columns["cpu_util"] == 12.5
    assert columns["memory_used_mb"] == 3000.0
    assert columns["memory_total_mb"] == 12000.0
    assert columns["memory_free_mb"] == 9000.0


def test_it_takes_memory_free_ratio_from_the_capacity_hint():
    snapshot = make_snapshot(free_mb=6000.0, total_mb=8000.0)
    snapshot["capacity_hint"]["memory_free_ratio"] = 0.5
    assert normalise(snapshot)["memory_free_ratio"] == 0.5


def test_it_computes_memory_free_ratio_without_a_hint():
    snapshot = make_snapshot(free_mb=1000.0, total_mb=3000.0)
    del snapshot["capacity_hint"]["memory_free_ratio"]
    assert normalise(snapshot)["memory_free_ratio"] == 0.3333


def test_it_computes_memory_free_ratio_when_the_hint_is_not_a_number():
    snapshot = make_snapshot(free_mb=2000.0, total_mb=8000.0)
    snapshot["capacity_hint"]["memory_free_ratio"] = "n/a"
    assert normalise(snapshot)["memory_free_ratio"] == 0.25


def test_it_gives_no_memory_free_ratio_without_a_total():
    snapshot = make_snapshot(free_mb=2000.0, total_mb=0.0)
    snapshot["capacity_hint"] = {}
    assert normalise(snapshot)["memory_free_ratio"] is None


def test_it_reads_the_first_network_interface_only():
    network = (
        {"iface": "eth0", "rx_mbps": 1.5, "tx_mbps": 2.5},
        {"iface": "eth1", "rx_mbps": 100.0, "tx_mbps": 200.0},
    )
    columns = normalise(make_snapshot(network=network))
    assert columns["network_rx_mbps"] == 1.5
    assert columns["network_tx_mbps"] == 2.5


def test_it_gives_null_network_rates_on_a_first_sample():
    columns = normalise(make_snapshot(network=({"iface": "eth0", "rx_mbps": None, "tx_mbps": None},)))
    assert columns["network_rx_mbps"] is None
    assert columns["network_tx_mbps"] is None


def test_it_gives_null_network_rates_without_interfaces():
    columns = normalise(make_snapshot(network=()))
    assert columns["network_rx_mbps"] is None
    assert columns["network_tx_mbps"] is None


# --- admission state and metadata ---------------------------------------------------

@pytest.mark.parametrize(("sent", "stored"), [("Accepting", "accepting"), ("DEGRADED", "degraded"), (" Rejecting ", "rejecting")])
def test_it_lower_cases_the_admission_state(sent, stored):
    assert normalise(make_snapshot(admission=sent))["admission_state"] == stored


@pytest.mark.parametrize("sent", [None, "", 3, ["accepting"]])
def test_it_gives_no_admission_state_when_none_is_sent(sent):
    assert normalise(make_snapshot(admission=sent))["admission_state"] is None


def test_it_reads_the_reporter_metadata():
    metadata = {
        "reported_instance_id": "i-7",
        "report_monotonic_ms": 123456,
        "report_wall_time_ms": 1767225601000,
        "agent_snapshot_timestamp_ms": 1767225599000,
        "report_seq": 9,
    }
    columns = normalise(make_snapshot(timestamp_ms=1767225599500), metadata, received_at=T0 + 1.25)
    assert columns["reported_instance_id"] == "i-7"
    assert columns["resource_report_monotonic_ms"] == 123456
    assert columns["resource_report_wall_time_ms"] == 1767225601000
    assert columns["agent_snapshot_timestamp_ms"] == 1767225599000
    assert columns["report_seq"] == 9
    assert columns["resource_ts_ms"] == 1767225599500
    assert columns["resource_reported_at"] == T0 + 1.25


def test_it_gives_null_metadata_fields_without_metadata():
    columns = normalise_snapshot(make_snapshot(), None, T0)
    for name in ("reported_instance_id", "resource_report_monotonic_ms", "resource_report_wall_time_ms",
                 "agent_snapshot_timestamp_ms", "report_seq"):
        assert columns[name] is None


def test_it_keeps_the_snapshot_as_sent():
    snapshot = make_snapshot(gpus=[make_gpu()], runtime={"engine": "vllm"})
    assert normalise(snapshot)["raw_resource"] == snapshot


def test_it_returns_every_resource_field():
    assert set(normalise()) == NORMALISED


# --- malformed parts never raise -----------------------------------------------------

@pytest.mark.parametrize(
    "snapshot",
    [
        {},
        {"devices": []},
        {"devices": "cpu"},
        {"devices": {"cpu": [], "memory": "lots", "network": "eth0", "gpu": {"0": {}}}},
        {"devices": {"gpu": ["GPU-0", 3, None, [1]], "network": [None, "eth0"]}},
        {"devices": {"gpu": [{"utilization_pct": {"avg": 1}, "memory_used_mb": [1], "utilization_source": 5}]}},
        {"capacity_hint": ["accepting"], "timestamp_ms": "yesterday"},
        {"capacity_hint": {"admission_state": {"state": "ok"}, "memory_free_ratio": []}},
    ],
)
def test_it_never_raises_on_malformed_parts(snapshot):
    columns = normalise_snapshot(snapshot, {"report_seq": "x", "reported_instance_id": 5}, T0)
    assert set(columns) == NORMALISED
    assert columns["cpu_util"] is None
    assert columns["admission_state"] is None
    assert columns["report_seq"] is None
    assert columns["reported_instance_id"] is None
    assert columns["resource_reported_at"] == T0


def test_it_reads_a_snapshot_that_is_not_an_object_as_empty():
    columns = normalise_snapshot(["not", "an", "object"], "nor this", T0)
    assert columns["raw_resource"] == {}
    assert columns["gpu_count"] is None


def test_it_skips_gpu_entries_that_are_not_objects():
    columns = normalise(with_gpus("GPU-0", make_gpu(1, avg=30.0), None))
    assert columns["gpu_count"] == 1
    assert columns["gpu_util_avg"] == 30.0


@pytest.mark.parametrize("value", [1e16, -1e16, "1e300", 1.7e308])
def test_it_reads_magnitudes_no_host_could_measure_as_null(value):
    columns = normalise(make_snapshot(cpu=value, used_mb=value))
    assert columns["cpu_util"] is None
    assert columns["memory_used_mb"] is None


def test_it_keeps_large_but_real_quantities():
    columns = normalise(make_snapshot(total_mb=2.0**40))  # a petabyte of memory, in MiB
    assert columns["memory_total_mb"] == 2.0**40


def test_it_counts_the_gpus_whose_health_is_error_for_placement():
    gpus = [make_gpu(0), make_gpu(1, health="ERROR"), make_gpu(2, health="degraded"), make_gpu(3, health=None)]
    assert normalise_snapshot(make_snapshot(gpus=gpus), {}, T0)["gpu_error_count"] == 1
    assert normalise_snapshot(make_snapshot(gpus=[]), {}, T0)["gpu_error_count"] == 0
    without = make_snapshot()
    del without["devices"]["gpu"]
    assert normalise_snapshot(without, {}, T0)["gpu_error_count"] is None  # no list: unknown, not 0

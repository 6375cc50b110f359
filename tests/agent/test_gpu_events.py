"""GPU hardware events (SPEC 13): critical XIDs, row remapping, slow and hung NVML calls."""

import threading
import time

import pynvml
import pytest

from agent.gpu import health as gpu_health
from agent.gpu.monitor import GpuMonitor
from agent.gpu.watch import GpuSampler
from agent.gpu.xid_events import XID_CRITICAL_ERROR, XidEvents
from tests.agent.fake_pynvml import FakeGpu, FakeNvml, volta_gpu

WAIT_S = 10  # bound on waiting for another thread; nothing asserts a wall time
READINGS = ["memory_used_mb", "memory_total_mb", "memory_free_mb", "temperature_c", "power_w", "power_limit_w",
            "sm_clock_mhz", "mem_clock_mhz", "ecc_uncorrected_volatile", "throttle_reasons",
            "remapped_rows_pending", "remapped_rows_failure", "utilization_pct", "utilization_pct_current"]


def monitor(nvml, clock, **kwargs):
    gpus = GpuMonitor(nvml, clock_ms=clock.ms, event_wait_ms=20, **kwargs)
    gpus.open()
    return gpus


def eventually(predicate):
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_it_uses_nvmls_own_codes():
    # The agent spells nvml.h's values out so it can load without pynvml; they must be the library's.
    assert XID_CRITICAL_ERROR == pynvml.nvmlEventTypeXidCriticalError
    for name in ("UNINITIALIZED", "NOT_SUPPORTED", "DRIVER_NOT_LOADED", "TIMEOUT", "FUNCTION_NOT_FOUND",
                 "GPU_IS_LOST", "RESET_REQUIRED", "LIB_RM_VERSION_MISMATCH"):
        assert getattr(gpu_health, f"NVML_ERROR_{name}") == getattr(pynvml, f"NVML_ERROR_{name}"), name


# --- row remapping ------------------------------------------------------------------

@pytest.mark.parametrize(("rows", "pending", "failure", "verdict"), [
    ((0, 0, 0, 0), False, False, ("ok", [])),
    ((3, 1, 1, 0), True, False, ("ok", [])),  # remapped, a reset applies it: the GPU still serves
    ((0, 8, 0, 1), False, True, ("error", ["row_remap_failure"])),  # no spare row left: drain and reset
])
def test_it_reads_row_remapping_and_fails_a_gpu_whose_remap_failed(clock, rows, pending, failure, verdict):
    [gpu] = monitor(FakeNvml([FakeGpu(remapped_rows=rows)]), clock).sample()
    assert (gpu["remapped_rows_pending"], gpu["remapped_rows_failure"]) == (pending, failure)
    assert (gpu["health"], gpu["health_reasons"]) == verdict


def test_it_nulls_row_remapping_on_a_gpu_without_it_and_asks_once(clock):
    nvml = FakeNvml([volta_gpu()])
    gpus = monitor(nvml, clock)
    gpus.sample()
    [gpu] = gpus.sample()
    assert (gpu["remapped_rows_pending"], gpu["remapped_rows_failure"], gpu["health"]) == (None, None, "ok")
    assert nvml.calls["nvmlDeviceGetRemappedRows"] == 1


# --- critical XIDs ------------------------------------------------------------------

def test_it_counts_xids_and_keeps_the_gpu_in_error_for_the_window():
    events = XidEvents(FakeNvml([]), clock_ms=lambda: 0, window_ms=300_000)
    events._listened.add(0)
    events.record(0, 79, at_ms=1_000)
    events.record(0, 48, at_ms=2_000)
    events.record(0, 79, at_ms=3_000)
    assert events.fields(0) == {"xid_last": 79, "xid_count": 3}
    assert events.recent_codes(0, now_ms=3_000) == [79, 48]  # distinct, newest first
    assert events.recent_codes(0, now_ms=302_000) == [79]  # the 48 is 300 s old now
    assert events.recent_codes(0, now_ms=303_000) == []
    assert events.fields(1) == {"xid_last": None, "xid_count": None}  # not listened to: unknown, not 0


def test_it_hears_a_critical_xid_through_the_event_api_and_errs_that_gpu_only(clock, two_gpus):
    gpus = monitor(two_gpus, clock, xid_window_ms=300_000)
    gpus.listen_for_events()
    try:
        first, second = gpus.sample()
        assert (first["xid_count"], first["xid_last"]) == (0, None)
        assert two_gpus.registered(0) and two_gpus.registered(1)
        two_gpus.raise_xid(1, 79)
        assert eventually(lambda: gpus.sample()[1]["xid_count"] == 1)
        first, second = gpus.sample()
        assert (second["xid_last"], second["health"], second["health_reasons"]) == (79, "error", ["xid_79"])
        assert (first["xid_count"], first["health"]) == (0, "ok")
        clock.advance(300_000)
        [_, second] = gpus.sample()
        assert (second["health"], second["xid_last"], second["xid_count"]) == ("ok", 79, 1)
    finally:
        gpus.close()
    assert two_gpus.calls["nvmlEventSetFree"] == 1 and not two_gpus._event_sets
    assert two_gpus.initialised == 0


def test_it_keeps_the_xid_count_when_nvml_is_opened_again(clock, two_gpus):
    gpus = monitor(two_gpus, clock)
    gpus._events.record(0, 94, clock.ms())
    gpus.open()
    assert gpus.sample()[0]["xid_count"] == 1 and two_gpus.registered(0)
    gpus.close()


def test_it_gives_null_xid_fields_where_nvml_refuses_the_events(clock):
    refusing = FakeGpu(uuid="GPU-vgpu", not_supported={"nvmlDeviceRegisterEvents"})
    first, second = monitor(FakeNvml([FakeGpu(), refusing]), clock).sample()
    assert (first["xid_count"], second["xid_count"], second["xid_last"]) == (0, None, None)
    assert second["health"] == "ok"
    [only] = monitor(FakeNvml([FakeGpu()], has_events=False), clock).sample()
    assert (only["xid_count"], only["health"]) == (None, "ok")


# --- slow and hung NVML calls -------------------------------------------------------

def test_it_degrades_a_gpu_whose_nvml_call_was_slow(clock):
    nvml = FakeNvml([FakeGpu(), FakeGpu(uuid="GPU-b")], clock=clock)
    gpus = monitor(nvml, clock, slow_ms=2000)
    nvml.slow["nvmlDeviceGetPowerUsage"] = 1500
    assert [gpu["health"] for gpu in gpus.sample()] == ["ok", "ok"]
    nvml.slow["nvmlDeviceGetPowerUsage"] = 2500
    first, second = gpus.sample()
    assert (first["health"], first["health_reasons"]) == ("degraded", ["nvml_slow"])
    assert first["power_w"] == 120.0  # the call did return: its reading is fresh


def test_the_watchdog_reports_every_gpu_unknown_while_a_call_hangs_and_recovers(clock, two_gpus):
    gpus = GpuMonitor(two_gpus, clock_ms=clock.ms, event_wait_ms=20)
    sampler = GpuSampler(gpus, slow_ms=100)
    sampler.start()
    try:
        assert [gpu["health"] for gpu in sampler.sample()] == ["ok", "ok"]
        hang = two_gpus.hang["nvmlDeviceGetTemperature"] = threading.Event()
        stalled = sampler.sample()  # waits slow_ms for the round, then gives up on it
        assert [(gpu["index"], gpu["uuid"]) for gpu in stalled] == [(0, "GPU-aaaa"), (1, "GPU-bbbb")]
        for gpu in stalled:
            assert (gpu["health"], gpu["health_reasons"], gpu["utilization_error"]) == (
                "degraded", ["nvml_slow"], "nvml_slow")
            assert [gpu[name] for name in READINGS] == [None] * len(READINGS)  # never the stale readings
            assert gpu["utilization_sample_ok"] is False and gpu["xid_count"] == 0
        assert gpus.call_in_progress[:2] == (0, "nvmlDeviceGetTemperature")
        reads = two_gpus.calls["nvmlDeviceGetUtilizationRates"]
        two_gpus.raise_xid(1, 119)  # the event thread still hears the driver meanwhile
        assert eventually(lambda: sampler.sample()[1]["health_reasons"] == ["xid_119", "nvml_slow"])
        assert sampler.sample()[1]["health"] == "error"
        assert two_gpus.calls["nvmlDeviceGetUtilizationRates"] == reads  # no second round piled up
        del two_gpus.hang["nvmlDeviceGetTemperature"]
        hang.set()
        assert eventually(lambda: sampler.sample()[0]["health"] == "ok")
        assert sampler.sample()[0]["temperature_c"] == 40
    finally:
        sampler.stop()
    assert two_gpus.initialised == 0


def test_the_watchdog_lets_a_normal_round_through_unchanged(clock, two_gpus):
    gpus = GpuMonitor(two_gpus, clock_ms=clock.ms, event_wait_ms=20)
    sampler = GpuSampler(gpus, slow_ms=2000)
    sampler.start()
    try:
        assert sampler.status == "ok" and sampler.names == ["NVIDIA H100 80GB HBM3"] * 2
        rows = [sampler.sample() for _ in range(3)]
        assert [row[0]["utilization_sample_count"] for row in rows] == [1, 2, 3]  # a fresh round each tick
        assert rows[-1][1]["utilization_pct_current"] == 80.0
    finally:
        sampler.stop()


def test_the_gpu_thread_is_left_alone_on_a_host_without_gpus_until_nvml_is_due_again(clock):
    nvml = FakeNvml([FakeGpu()], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    sampler = GpuSampler(GpuMonitor(nvml, clock_ms=clock.ms, event_wait_ms=20), slow_ms=2000)
    sampler.start()
    try:
        assert sampler.sample() == [] and sampler.status == "nvml_unavailable: Driver Not Loaded"
        assert sampler._rounds == 0  # nothing to read: no round handed to the thread
        nvml.init_error = None
        clock.advance(60_000)  # NVML is tried again on the thread, and found
        [gpu] = sampler.sample()
        assert gpu["health"] == "ok" and sampler.status == "ok" and nvml.calls["nvmlInit"] == 2
    finally:
        sampler.stop()

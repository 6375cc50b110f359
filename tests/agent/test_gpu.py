"""GPUs through (a faithful fake of) NVML: fields, window, health, failures."""

import re
import sys

import pynvml
import pytest

from agent.gpu.health import UtilizationWindow, decode_throttle_reasons, gpu_health
from agent.gpu.monitor import GpuMonitor
from tests.agent.fake_pynvml import GIB, FakeGpu, FakeNvml, NVML_VALUE_NOT_AVAILABLE_uint, geforce_gpu, mig_gpu

# Every field of the original agent's GPU row (SPEC 2.2), with its type.
ORIGINAL_FIELDS = {
    "index": int, "uuid": str, "name": str, "utilization_pct": float, "utilization_pct_current": float,
    "utilization_pct_avg": float, "utilization_pct_max": float, "utilization_sample_count": int,
    "utilization_window_ms": int, "utilization_sample_ok": bool, "utilization_source": str,
    "utilization_sample_timestamp_ms": int, "utilization_sample_quality": str, "utilization_raw_value": str,
    "utilization_error": str, "memory_used_mb": float, "memory_total_mb": float, "memory_free_mb": float,
    "temperature_c": int, "power_w": float, "health": str,
}
# And this agent's additions.
ADDED_FIELDS = {
    "power_limit_w": float, "sm_clock_mhz": int, "mem_clock_mhz": int, "ecc_uncorrected_volatile": int,
    "throttle_reasons": list, "health_reasons": list, "utilization_sample_age_ms": int,
    # SPEC 13's hardware events (xid_last is null until an XID comes).
    "xid_last": int, "xid_count": int, "remapped_rows_pending": bool, "remapped_rows_failure": bool,
}
GPU_FIELDS = set(ORIGINAL_FIELDS) | set(ADDED_FIELDS)
# Wall-clock epoch ms at the fake clock's zero: the GPU rows' timestamps are wall time.
WALL_AT_ZERO_MS = 1_767_225_600_000


def monitor(nvml, clock, **kwargs):
    gpus = GpuMonitor(nvml, clock_ms=clock.ms, clock_wall_ms=lambda: WALL_AT_ZERO_MS + clock.ms(), **kwargs)
    gpus.open()
    return gpus


# --- pure parts ---------------------------------------------------------------------

def test_it_averages_the_samples_of_the_last_window():
    window = UtilizationWindow(5000)
    for at, pct in [(0, 10), (1000, 20), (2000, 30), (3000, 40), (4000, 50), (5000, 60)]:
        window.add(at, pct)
    # The sample at t=0 is exactly one window old at t=5000 and has left it.
    assert window.summary(5000) == (40.0, 60.0, 5, 0)
    assert window.summary(5500) == (40.0, 60.0, 5, 500)
    assert window.summary(9500) == (60.0, 60.0, 1, 4500)
    assert window.summary(10_000) == (None, None, 0, None)


def test_it_decodes_throttle_masks_to_names():
    assert decode_throttle_reasons(0) == []
    assert decode_throttle_reasons(0x1 | 0x4 | 0x40) == ["gpu_idle", "sw_power_cap", "hw_thermal_slowdown"]
    assert decode_throttle_reasons(0x8 | 0x10000) == ["hw_slowdown", "unknown_0x10000"]
    assert decode_throttle_reasons(None) is None


@pytest.mark.parametrize("kwargs, verdict", [
    ({}, ("ok", [])),
    ({"temperature_c": 84}, ("ok", [])),
    ({"temperature_c": 85}, ("degraded", ["temperature_c=85>=85"])),
    ({"throttle_reasons": ["gpu_idle", "sw_power_cap"]}, ("ok", [])),
    ({"throttle_reasons": ["hw_slowdown"]}, ("degraded", ["throttle:hw_slowdown"])),
    ({"failed_reads": [("memory", "Timeout")]}, ("degraded", ["memory_read_failed:Timeout"])),
    ({"ecc_uncorrected": 2}, ("error", ["ecc_uncorrected_volatile=2"])),
    ({"ecc_uncorrected": 0}, ("ok", [])),
    ({"device_failure": "gpu_lost", "temperature_c": 90}, ("error", ["gpu_lost", "temperature_c=90>=85"])),
])
def test_it_judges_health_by_its_rules(kwargs, verdict):
    assert gpu_health(**kwargs) == verdict


def test_it_takes_the_temperature_threshold_from_a_setting():
    assert gpu_health(temperature_c=80, temp_degraded_c=75.0) == ("degraded", ["temperature_c=80>=75"])


# --- against the fake NVML ----------------------------------------------------------

def test_it_reads_every_field_in_snapshot_units(clock):
    nvml = FakeNvml([FakeGpu(name="NVIDIA H100 80GB HBM3", uuid="GPU-h100", utilization=63,
                             memory_total=80 * GIB, memory_used=60 * GIB, temperature_c=55, power_mw=312_456,
                             power_limit_mw=700_000, sm_clock_mhz=1755, mem_clock_mhz=2619, clocks_event_mask=0x4)])
    gpus = monitor(nvml, clock)
    assert gpus.status == "ok" and gpus.names == ["NVIDIA H100 80GB HBM3"]
    [gpu] = gpus.sample()
    assert set(gpu) == GPU_FIELDS
    assert gpu == {
        "index": 0, "uuid": "GPU-h100", "name": "NVIDIA H100 80GB HBM3",
        "utilization_pct": 63.0, "utilization_pct_current": 63.0, "utilization_pct_avg": 63.0,
        "utilization_pct_max": 63.0, "utilization_sample_count": 1, "utilization_window_ms": 5000,
        "utilization_sample_ok": True, "utilization_sample_quality": "ok", "utilization_sample_age_ms": 0,
        "utilization_sample_timestamp_ms": WALL_AT_ZERO_MS + clock.ms(), "utilization_raw_value": "63",
        "utilization_error": None, "utilization_source": "nvml",
        "memory_used_mb": 61440.0, "memory_total_mb": 81920.0, "memory_free_mb": 20480.0,
        "temperature_c": 55, "power_w": 312.5, "power_limit_w": 700.0, "sm_clock_mhz": 1755, "mem_clock_mhz": 2619,
        "ecc_uncorrected_volatile": 0, "throttle_reasons": ["sw_power_cap"],
        "remapped_rows_pending": False, "remapped_rows_failure": False, "xid_last": None, "xid_count": 0,
        "health": "ok", "health_reasons": [],
    }


def test_it_gives_every_original_field_its_type(clock, two_gpus):
    for gpu in monitor(two_gpus, clock).sample():
        assert set(gpu) == GPU_FIELDS
        for field, kind in {**ORIGINAL_FIELDS, **ADDED_FIELDS}.items():
            if field in ("utilization_error", "xid_last"):
                assert gpu[field] is None  # a good read has no error, a healthy GPU no XID
                continue
            assert isinstance(gpu[field], kind) and not (kind is int and isinstance(gpu[field], bool)), field


def test_it_stamps_the_newest_sample_in_the_window_with_wall_time(clock):
    board = FakeGpu(utilization=40)
    gpus = monitor(FakeNvml([board]), clock)
    gpus.sample()
    sampled_at = WALL_AT_ZERO_MS + clock.ms()
    clock.advance(700)
    board.failing["nvmlDeviceGetUtilizationRates"] = pynvml.NVML_ERROR_UNKNOWN
    [gpu] = gpus.sample()
    assert gpu["utilization_sample_timestamp_ms"] == sampled_at
    assert gpu["utilization_sample_age_ms"] == 700


def test_it_reports_utilisation_as_the_rolling_window_average(clock):
    board = FakeGpu()
    gpus = monitor(FakeNvml([board]), clock, window_ms=3000)
    for pct in (10, 20, 90):
        board.utilization = pct
        [gpu] = gpus.sample()
        clock.advance(1000)
    assert (gpu["utilization_pct"], gpu["utilization_pct_avg"]) == (40.0, 40.0)
    assert (gpu["utilization_pct_current"], gpu["utilization_pct_max"]) == (90.0, 90.0)
    assert (gpu["utilization_sample_count"], gpu["utilization_window_ms"]) == (3, 3000)
    board.utilization = 30
    [gpu] = gpus.sample()
    # The 10 % sample is now one window old and has dropped out: (20 + 90 + 30) / 3.
    assert (gpu["utilization_pct"], gpu["utilization_sample_count"]) == (46.7, 3)


def test_it_opens_handles_once_and_reuses_them(clock, two_gpus):
    gpus = monitor(two_gpus, clock)
    for _ in range(5):
        gpus.sample()
    assert two_gpus.calls["nvmlInit"] == 1
    assert two_gpus.calls["nvmlDeviceGetHandleByIndex"] == 2
    assert two_gpus.calls["nvmlDeviceGetUtilizationRates"] == 10


def test_it_nulls_unsupported_values_and_does_not_ask_again(clock):
    nvml = FakeNvml([geforce_gpu(not_supported={"nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetPowerUsage"})])
    gpus = monitor(nvml, clock)
    gpus.sample()
    [gpu] = gpus.sample()
    assert gpu["ecc_uncorrected_volatile"] is None and gpu["power_w"] is None
    assert gpu["power_limit_w"] == 700.0
    assert gpu["health"] == "ok"
    assert nvml.calls["nvmlDeviceGetTotalEccErrors"] == 1
    assert nvml.calls["nvmlDeviceGetPowerUsage"] == 1


def test_it_nulls_a_value_nvml_marks_not_available(clock):
    nvml = FakeNvml([FakeGpu(power_mw=NVML_VALUE_NOT_AVAILABLE_uint)])
    [gpu] = monitor(nvml, clock).sample()
    assert gpu["power_w"] is None


def test_it_reports_unsupported_quality_for_a_mig_gpu_without_utilisation(clock):
    [gpu] = monitor(FakeNvml([mig_gpu()]), clock).sample()
    assert gpu["utilization_sample_ok"] is False
    assert gpu["utilization_sample_quality"] == "unsupported"
    assert gpu["utilization_pct"] is None and gpu["utilization_pct_current"] is None
    assert gpu["utilization_sample_count"] == 0 and gpu["utilization_sample_age_ms"] is None
    assert gpu["utilization_sample_timestamp_ms"] is None and gpu["utilization_raw_value"] is None
    assert gpu["utilization_error"] == "not_supported"
    assert gpu["memory_total_mb"] == 40960.0
    assert gpu["health"] == "ok"


def test_it_degrades_the_gpu_and_marks_the_sample_when_utilisation_fails(clock):
    board = FakeGpu(utilization=50)
    gpus = monitor(FakeNvml([board]), clock)
    gpus.sample()
    clock.advance(1000)
    board.failing["nvmlDeviceGetUtilizationRates"] = pynvml.NVML_ERROR_TIMEOUT
    [gpu] = gpus.sample()
    assert gpu["utilization_sample_ok"] is False and gpu["utilization_sample_quality"] == "error"
    assert gpu["utilization_pct_current"] is None
    # The window still holds the earlier good sample, one second old.
    assert (gpu["utilization_pct_avg"], gpu["utilization_sample_age_ms"]) == (50.0, 1000)
    assert gpu["utilization_sample_timestamp_ms"] == WALL_AT_ZERO_MS + clock.ms() - 1000
    assert (gpu["utilization_raw_value"], gpu["utilization_error"]) == (None, "Timeout")
    assert (gpu["health"], gpu["health_reasons"]) == ("degraded", ["utilization_read_failed:Timeout"])


def test_it_marks_a_gpu_lost_mid_run_an_error_and_carries_on_with_the_others(clock, two_gpus):
    gpus = monitor(two_gpus, clock)
    gpus.sample()
    two_gpus.gpus[1].lost = True
    clock.advance(1000)
    first, second = gpus.sample()
    assert first["health"] == "ok" and first["utilization_pct_current"] == 40.0
    assert (second["health"], second["health_reasons"]) == ("error", ["gpu_lost"])
    assert second["utilization_sample_ok"] is False and second["utilization_sample_quality"] == "error"
    assert second["utilization_pct"] is None and second["memory_used_mb"] is None
    assert (second["utilization_error"], second["utilization_raw_value"]) == ("gpu_lost", None)
    assert second["utilization_sample_timestamp_ms"] is None
    assert second["uuid"] == "GPU-bbbb"
    # After a reset the GPU comes back on a fresh handle.
    two_gpus.gpus[1].lost = False
    clock.advance(1000)
    second = gpus.sample()[1]
    assert second["health"] == "ok" and second["utilization_pct_current"] == 80.0
    assert two_gpus.calls["nvmlDeviceGetHandleByIndex"] == 3


def test_it_makes_a_gpu_with_uncorrected_ecc_errors_an_error(clock):
    [gpu] = monitor(FakeNvml([FakeGpu(ecc_uncorrected_volatile=3)]), clock).sample()
    assert (gpu["health"], gpu["health_reasons"]) == ("error", ["ecc_uncorrected_volatile=3"])


def test_it_degrades_a_gpu_on_hardware_slowdown_and_heat(clock):
    [gpu] = monitor(FakeNvml([FakeGpu(temperature_c=91, clocks_event_mask=0x40 | 0x4)]), clock).sample()
    assert gpu["throttle_reasons"] == ["sw_power_cap", "hw_thermal_slowdown"]
    assert (gpu["health"], gpu["health_reasons"]) == (
        "degraded", ["temperature_c=91>=85", "throttle:hw_thermal_slowdown"])


def test_it_falls_back_to_throttle_reasons_on_old_drivers(clock):
    nvml = FakeNvml([FakeGpu(clocks_event_mask=0x8)], has_clocks_event_reasons=False)
    gpus = monitor(nvml, clock)
    gpus.sample()
    [gpu] = gpus.sample()
    assert gpu["throttle_reasons"] == ["hw_slowdown"]
    assert nvml.calls["nvmlDeviceGetCurrentClocksEventReasons"] == 1
    assert nvml.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 2


def test_it_lists_no_gpus_without_the_driver_and_says_why(clock):
    gpus = monitor(FakeNvml(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND), clock)
    assert gpus.sample() == []
    assert gpus.status == "nvml_unavailable: NVML Shared Library Not Found"


def test_it_tries_nvml_again_later_when_the_driver_was_not_ready(clock):
    nvml = FakeNvml([FakeGpu()], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    gpus = monitor(nvml, clock)
    assert gpus.status == "nvml_unavailable: Driver Not Loaded"
    nvml.init_error = None
    clock.advance(30_000)
    assert gpus.sample() == []
    clock.advance(30_000)
    assert len(gpus.sample()) == 1 and gpus.status == "ok"


def test_it_says_no_gpu_on_a_host_without_gpus(clock):
    nvml = FakeNvml([])
    gpus = monitor(nvml, clock)
    assert (gpus.status, gpus.sample()) == ("no_gpu", [])
    assert nvml.initialised == 0  # NVML is released when there is nothing to watch


def test_it_says_so_when_pynvml_is_not_installed(clock, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes "import pynvml" fail
    gpus = GpuMonitor(None, clock_ms=clock.ms)
    gpus.open()
    assert gpus.status == "nvml_unavailable: pynvml is not installed"
    assert gpus.sample() == []


def test_it_loads_the_real_pynvml_when_none_is_given(clock):
    gpus = GpuMonitor(None, clock_ms=clock.ms)
    gpus.open()
    assert gpus._nvml is pynvml
    # Whatever this host has, the status is one of the three SPEC forms and
    # agrees with the GPU list.
    assert re.fullmatch(r"ok|no_gpu|nvml_unavailable: .+", gpus.status)
    assert (gpus.status == "ok") == bool(gpus.sample())
    gpus.close()


def test_it_marks_the_gpu_not_the_agent_on_an_unexpected_exception(clock, two_gpus):
    gpus = monitor(two_gpus, clock)

    def broken(handle):
        raise RuntimeError("driver returned garbage")

    two_gpus.nvmlDeviceGetTemperature = lambda handle, sensor: broken(handle)
    first, second = gpus.sample()
    assert first["health"] == "error" and first["health_reasons"] == ["agent_error:RuntimeError"]
    assert second["health"] == "error"


def test_it_shuts_nvml_down_on_close(clock, two_gpus):
    gpus = monitor(two_gpus, clock)
    gpus.close()
    assert two_gpus.initialised == 0


def test_it_reinitialises_nvml_after_the_driver_went_away(clock, two_gpus):
    gpus = monitor(two_gpus, clock)
    gpus.sample()
    two_gpus.initialised = 0  # driver reloaded: every call now answers Uninitialized
    clock.advance(1000)
    assert [gpu["health_reasons"] for gpu in gpus.sample()] == [["nvml_uninitialized"]] * 2
    clock.advance(1000)
    still = gpus.sample()
    assert [gpu["health"] for gpu in still] == ["error", "error"]  # still listed, not a GPU-less host
    assert two_gpus.calls["nvmlInit"] == 1
    clock.advance(60_000)
    back = gpus.sample()
    assert two_gpus.calls["nvmlInit"] == 2
    assert [gpu["health"] for gpu in back] == ["ok", "ok"] and gpus.status == "ok"

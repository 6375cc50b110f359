"""GPU health: the rules, the NVML return codes they depend on, the utilisation window.

Pure: values in, verdicts out, so the agent's GPU monitor, its watchdog and
the fleet simulator judge a GPU the same way.
"""

from __future__ import annotations

from collections import deque

# Return codes of nvml.h; part of NVML's stable ABI, identical in pynvml.
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_TIMEOUT = 10  # nvmlEventSetWait: no event within its timeout

# Codes after which nothing else can be read from the device this round.
DEVICE_FAILURES = {
    NVML_ERROR_GPU_IS_LOST: "gpu_lost",
    NVML_ERROR_RESET_REQUIRED: "reset_required",
    NVML_ERROR_UNINITIALIZED: "nvml_uninitialized",
    NVML_ERROR_DRIVER_NOT_LOADED: "driver_not_loaded",
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: "driver_version_mismatch",
}
# Failures of the library rather than of one GPU: only a fresh nvmlInit helps.
LIBRARY_FAILURES = {"nvml_uninitialized", "driver_not_loaded", "driver_version_mismatch"}
UNSUPPORTED_CODES = {NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_FUNCTION_NOT_FOUND}
# NVML's "value not available" sentinels (unsigned -1).
NOT_AVAILABLE = {0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF}

# Bits of nvmlDeviceGetCurrentClocksEventReasons (formerly ...ThrottleReasons).
THROTTLE_BITS = (
    (0x001, "gpu_idle"),
    (0x002, "applications_clocks_setting"),
    (0x004, "sw_power_cap"),
    (0x008, "hw_slowdown"),
    (0x010, "sync_boost"),
    (0x020, "sw_thermal_slowdown"),
    (0x040, "hw_thermal_slowdown"),
    (0x080, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
    (0x200, "board_limit"),
    (0x400, "reliability"),
)
# Slowdowns that mean the GPU is not delivering its normal speed. Power-cap
# and idle throttling are normal operation and leave health alone.
DEGRADING_THROTTLES = {"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}

HEALTH_OK, HEALTH_DEGRADED, HEALTH_ERROR = "ok", "degraded", "error"
# The reason SPEC 13 gives a GPU whose NVML call did not return in time.
NVML_SLOW = "nvml_slow"
ROW_REMAP_FAILURE = "row_remap_failure"


def decode_throttle_reasons(mask):
    """Names of the set bits of a clocks-event mask; unknown bits as ``unknown_0x...``."""
    if mask is None:
        return None
    names = [name for bit, name in THROTTLE_BITS if mask & bit]
    known = 0
    for bit, _ in THROTTLE_BITS:
        known |= bit
    rest = mask & ~known
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"unknown_0x{bit:x}")
            rest &= ~bit
        bit <<= 1
    return names


def gpu_health(device_failure=None, failed_reads=(), temperature_c=None, ecc_uncorrected=None,
               throttle_reasons=None, temp_degraded_c=85.0, xid_codes=(), remap_failure=None, nvml_slow=False):
    """``(health, reasons)`` of one GPU from what was read this round.

    error: the device could not be read at all, it has uncorrected (volatile)
    ECC errors, it raised a critical XID lately (``xid_codes``, newest first)
    or its row remapping failed; NVIDIA treats each as "drain and reset".
    degraded: its utilisation or memory could not be read, an NVML call took
    too long (its state is unknown, never a stale ok), it is at or above the
    temperature threshold, or clocks are held down by a slowdown.
    """
    errors, degraded = [], []
    if device_failure:
        errors.append(device_failure)
    if ecc_uncorrected:
        errors.append(f"ecc_uncorrected_volatile={ecc_uncorrected}")
    errors.extend(f"xid_{code}" for code in xid_codes)
    if remap_failure:
        errors.append(ROW_REMAP_FAILURE)
    if nvml_slow:
        degraded.append(NVML_SLOW)
    degraded.extend(f"{field}_read_failed:{name}" for field, name in failed_reads)
    if temperature_c is not None and temperature_c >= temp_degraded_c:
        degraded.append(f"temperature_c={temperature_c}>={temp_degraded_c:g}")
    degraded.extend(f"throttle:{name}" for name in throttle_reasons or () if name in DEGRADING_THROTTLES)
    if errors:
        return HEALTH_ERROR, errors + degraded
    if degraded:
        return HEALTH_DEGRADED, degraded
    return HEALTH_OK, []


class UtilizationWindow:
    """Utilisation samples of the last ``window_ms``, newest last."""

    def __init__(self, window_ms):
        self.window_ms = window_ms
        self._samples = deque()

    def add(self, at_ms, pct):
        self._samples.append((at_ms, float(pct)))
        self._prune(at_ms)

    def clear(self):
        self._samples.clear()

    def _prune(self, now_ms):
        while self._samples and self._samples[0][0] <= now_ms - self.window_ms:
            self._samples.popleft()

    def summary(self, now_ms):
        """``(avg, max, count, age_ms)`` over the window ending at ``now_ms``; Nones when empty."""
        self._prune(now_ms)
        if not self._samples:
            return None, None, 0, None
        values = [pct for _, pct in self._samples]
        return (round(sum(values) / len(values), 1), max(values), len(values),
                max(0, int(now_ms - self._samples[-1][0])))


"""NVIDIA GPUs through NVML (``nvidia-ml-py``, module ``pynvml``).

NVML is initialised once and its device handles are reused for every sample;
nothing here spawns ``nvidia-smi``. The NVML module is a constructor argument
so tests can pass a fake with the same functions and error classes; ``None``
imports the real ``pynvml``, which is what runs on a GPU host.

Reading rules, in the order an operator would ask about them:

- A value the device does not support (``NVMLError_NotSupported``, or a
  driver without the function) is null, and is not asked for again.
- A device-level failure (GPU lost, reset required, NVML or driver gone) makes
  that GPU's health ``error``; the agent keeps running and tries the GPU
  again on the next sample.
- Utilisation is averaged over a rolling window (SPEC 2.2) of the samples
  taken in the last ``window_ms``.
- Each GPU row carries every field of the original agent's row under its
  original name and unit (``utilization_sample_timestamp_ms`` is the wall
  time of the newest sample in the window, ``utilization_raw_value`` the
  last raw reading as text, ``utilization_error`` why a read failed), so the
  original Proxy and its UI read these snapshots unchanged.
"""

from __future__ import annotations

import importlib
import logging
from collections import deque

from agent.sampler import MIB, monotonic_ms, wall_ms

log = logging.getLogger(__name__)

# Return codes of nvml.h; part of NVML's stable ABI, identical in pynvml.
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18

NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0

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
NVML_RETRY_MS = 60_000

HEALTH_OK, HEALTH_DEGRADED, HEALTH_ERROR = "ok", "degraded", "error"
READING_FIELDS = (
    "memory_used_mb", "memory_total_mb", "memory_free_mb", "temperature_c", "power_w", "power_limit_w",
    "sm_clock_mhz", "mem_clock_mhz", "ecc_uncorrected_volatile", "throttle_reasons",
)


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
               throttle_reasons=None, temp_degraded_c=85.0):
    """``(health, reasons)`` of one GPU from what was read this round.

    error: the device could not be read at all, or it has uncorrected
    (volatile) ECC errors, which NVIDIA treats as "drain and reset".
    degraded: its utilisation or memory could not be read, it is at or above
    the temperature threshold, or clocks are held down by a slowdown.
    """
    errors, degraded = [], []
    if device_failure:
        errors.append(device_failure)
    if ecc_uncorrected:
        errors.append(f"ecc_uncorrected_volatile={ecc_uncorrected}")
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


def _error_name(error):
    name = type(error).__name__
    return name[len("NVMLError_"):] if name.startswith("NVMLError_") else f"code_{getattr(error, 'value', '?')}"


class _Reader:
    """One round of reads on one device; stops asking after a device-level failure."""

    def __init__(self, nvml, gpu):
        self._nvml = nvml
        self._gpu = gpu
        self.device_failure = None
        self.failed = {}  # field -> short error name

    def read(self, field, function, *args):
        if self.device_failure or field in self._gpu.unsupported:
            return None
        try:
            value = function(*args)
        except self._nvml.NVMLError as error:
            code = getattr(error, "value", None)
            if code in UNSUPPORTED_CODES:
                self._gpu.unsupported.add(field)
            elif code in DEVICE_FAILURES:
                self.device_failure = DEVICE_FAILURES[code]
            else:
                self.failed[field] = _error_name(error)
            return None
        if isinstance(value, int) and value in NOT_AVAILABLE:
            return None
        return value


class _Gpu:
    def __init__(self, index, window_ms):
        self.index = index
        self.handle = None
        self.uuid = None
        self.name = None
        self.attach_failure = None
        self.unsupported = set()
        self.legacy_throttle = False
        self.window = UtilizationWindow(window_ms)
        self.last_health = None


def _text(value):
    # nvidia-ml-py decodes strings; pynvml releases before 11.x returned bytes.
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _mib(value):
    return None if value is None else round(value / MIB, 1)


class GpuMonitor:
    """All GPUs of the host; ``sample()`` returns the snapshot's ``devices.gpu`` list."""

    def __init__(self, nvml=None, window_ms=5000, temp_degraded_c=85.0, clock_ms=monotonic_ms,
                 clock_wall_ms=wall_ms):
        self._nvml = nvml
        self._window_ms = window_ms
        self._temp_degraded_c = temp_degraded_c
        self._clock_ms = clock_ms
        self._wall_ms = clock_wall_ms
        self._gpus = []
        self._initialised = False
        self._retry_at = None
        self.status = "nvml_unavailable: not opened"

    @property
    def names(self):
        return [gpu.name for gpu in self._gpus]

    def open(self):
        """Initialise NVML and attach every GPU. Never raises; ``status`` says how it went.

        When NVML cannot be opened again at run time, the GPUs seen before stay
        listed (as errors): a GPU host must not pass for a host without GPUs.
        """
        self._retry_at = None
        self.close()
        if self._nvml is None:
            try:
                self._nvml = importlib.import_module("pynvml")
            except ImportError:
                self.status = "nvml_unavailable: pynvml is not installed"
                return
        nvml = self._nvml
        try:
            nvml.nvmlInit()
            self._initialised = True
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as error:
            self._unavailable(str(error))
            return
        except OSError as error:  # a broken libnvidia-ml can fail below pynvml's own checks
            self._unavailable(str(error))
            return
        self._gpus = [_Gpu(index, self._window_ms) for index in range(count)]
        for gpu in self._gpus:
            self._attach(gpu)
        self.status = "ok" if self._gpus else "no_gpu"
        if not self._gpus:
            self.close()
        log.info("NVML: %s, GPUs: %s", self.status, ", ".join(str(n) for n in self.names) or "none")

    def _unavailable(self, reason):
        # A driver that loads after the agent (boot order) is picked up later.
        repeated = self.status == f"nvml_unavailable: {reason}"
        self.status = f"nvml_unavailable: {reason}"
        self._retry_at = self._clock_ms() + NVML_RETRY_MS
        self.close()
        log.log(logging.DEBUG if repeated else logging.WARNING,
                "NVML unavailable (%s); reporting no GPUs, trying again every %d s", reason, NVML_RETRY_MS // 1000)

    def close(self):
        if self._initialised:
            self._initialised = False
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError as error:
                log.debug("nvmlShutdown: %s", error)

    def _attach(self, gpu):
        nvml = self._nvml
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(gpu.index)
            gpu.uuid = _text(nvml.nvmlDeviceGetUUID(handle))
            gpu.name = _text(nvml.nvmlDeviceGetName(handle))
        except nvml.NVMLError as error:
            code = getattr(error, "value", None)
            gpu.attach_failure = DEVICE_FAILURES.get(code, f"nvml_error:{_error_name(error)}")
            return
        gpu.handle = handle
        gpu.attach_failure = None

    def sample(self):
        if self._retry_at is not None and self._clock_ms() >= self._retry_at:
            self.open()
        now = self._clock_ms()
        entries = []
        for gpu in self._gpus:
            try:
                entry = self._sample_gpu(gpu, now)
            except Exception as error:  # noqa: BLE001 - one odd GPU must not stop the agent
                log.exception("GPU %d: unexpected error while sampling", gpu.index)
                gpu.handle = None
                entry = self._failed_entry(gpu, now, f"agent_error:{type(error).__name__}")
            self._note_health(gpu, entry)
            entries.append(entry)
        if self._gpus and self._retry_at is None and all(
                gpu.handle is None and gpu.attach_failure in LIBRARY_FAILURES for gpu in self._gpus):
            # The driver was reloaded or upgraded under us: the library's state
            # is stale until NVML is initialised afresh.
            log.warning("NVML lost its driver (%s); reinitialising in %d s", self._gpus[0].attach_failure,
                        NVML_RETRY_MS // 1000)
            self._retry_at = now + NVML_RETRY_MS
        return entries

    def _note_health(self, gpu, entry):
        if entry["health"] != gpu.last_health:
            level = logging.INFO if entry["health"] == HEALTH_OK else logging.WARNING
            log.log(level, "GPU %d health %s -> %s %s", gpu.index, gpu.last_health, entry["health"],
                    entry["health_reasons"])
            gpu.last_health = entry["health"]

    def _sample_gpu(self, gpu, now):
        nvml = self._nvml
        if gpu.handle is None:
            self._attach(gpu)
        if gpu.handle is None:
            return self._failed_entry(gpu, now, gpu.attach_failure)
        handle = gpu.handle
        reader = _Reader(nvml, gpu)
        rates = reader.read("utilization", nvml.nvmlDeviceGetUtilizationRates, handle)
        memory = reader.read("memory", nvml.nvmlDeviceGetMemoryInfo, handle)
        temperature = reader.read("temperature", nvml.nvmlDeviceGetTemperature, handle, NVML_TEMPERATURE_GPU)
        power_mw = reader.read("power", nvml.nvmlDeviceGetPowerUsage, handle)
        limit_mw = reader.read("power_limit", nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
        sm_clock = reader.read("sm_clock", nvml.nvmlDeviceGetClockInfo, handle, NVML_CLOCK_SM)
        mem_clock = reader.read("mem_clock", nvml.nvmlDeviceGetClockInfo, handle, NVML_CLOCK_MEM)
        ecc = reader.read("ecc", nvml.nvmlDeviceGetTotalEccErrors, handle,
                          NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC)
        throttle = decode_throttle_reasons(self._throttle_mask(reader, gpu))

        if reader.device_failure:
            gpu.handle = None  # handles may be stale after a reset: attach again next time
            return self._failed_entry(gpu, now, reader.device_failure)

        utilization = None if rates is None else rates.gpu
        if utilization is not None:
            gpu.window.add(now, utilization)
            quality, error = "ok", None
        elif "utilization" in gpu.unsupported:
            quality, error = "unsupported", "not_supported"
        else:
            quality, error = "error", reader.failed.get("utilization", "unknown")
        core_failures = [(f, reader.failed[f]) for f in ("utilization", "memory") if f in reader.failed]
        health, reasons = gpu_health(None, core_failures, temperature, ecc, throttle, self._temp_degraded_c)
        return self._entry(gpu, now, utilization, quality, error, health, reasons, {
            "memory_used_mb": _mib(memory.used) if memory is not None else None,
            "memory_total_mb": _mib(memory.total) if memory is not None else None,
            "memory_free_mb": _mib(memory.free) if memory is not None else None,
            "temperature_c": temperature,
            "power_w": None if power_mw is None else round(power_mw / 1000.0, 1),
            "power_limit_w": None if limit_mw is None else round(limit_mw / 1000.0, 1),
            "sm_clock_mhz": sm_clock,
            "mem_clock_mhz": mem_clock,
            "ecc_uncorrected_volatile": ecc,
            "throttle_reasons": throttle,
        })

    def _throttle_mask(self, reader, gpu):
        """Clock-event reasons; drivers before R535 only have the older ThrottleReasons name."""
        nvml = self._nvml
        if not gpu.legacy_throttle:
            events = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
            if events is not None:
                mask = reader.read("throttle", events, gpu.handle)
                if "throttle" not in gpu.unsupported:
                    return mask
                gpu.unsupported.discard("throttle")
            gpu.legacy_throttle = True
        return reader.read("throttle", nvml.nvmlDeviceGetCurrentClocksThrottleReasons, gpu.handle)

    def _entry(self, gpu, now, utilization, quality, error, health, reasons, readings):
        avg, peak, count, age = gpu.window.summary(now)
        return {
            "index": gpu.index,
            "uuid": gpu.uuid,
            "name": gpu.name,
            "utilization_pct": avg,
            "utilization_pct_current": None if utilization is None else float(utilization),
            "utilization_pct_avg": avg,
            "utilization_pct_max": peak,
            "utilization_sample_count": count,
            "utilization_window_ms": self._window_ms,
            "utilization_sample_ok": quality == "ok",
            "utilization_sample_quality": quality,
            "utilization_sample_timestamp_ms": None if age is None else self._wall_ms() - age,
            "utilization_sample_age_ms": age,
            "utilization_raw_value": None if utilization is None else str(utilization),
            "utilization_error": error,
            "utilization_source": "nvml",
            **readings,
            "health": health,
            "health_reasons": reasons,
        }

    def _failed_entry(self, gpu, now, failure):
        # Samples from before the failure describe a device that is gone.
        gpu.window.clear()
        health, reasons = gpu_health(failure)
        return self._entry(gpu, now, None, "error", failure, health, reasons, dict.fromkeys(READING_FIELDS))

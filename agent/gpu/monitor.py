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
- Hardware events (SPEC 13): critical XIDs come from NVML's event API
  (``xid_events.py``); row remapping is read every round; every call is
  timed, and one slower than ``slow_ms`` makes the GPU ``degraded``
  (``nvml_slow``). A call that never returns is the watchdog's business
  (``watch.py``): it sees ``call_in_progress`` from the sampler thread.
- Each GPU row carries every field of the original agent's row under its
  original name and unit (``utilization_sample_timestamp_ms`` is the wall
  time of the newest sample in the window, ``utilization_raw_value`` the
  last raw reading as text, ``utilization_error`` why a read failed), so the
  original Proxy and its UI read these snapshots unchanged.
"""

from __future__ import annotations

import importlib
import logging

from agent.gpu.health import (
    DEVICE_FAILURES,
    HEALTH_OK,
    LIBRARY_FAILURES,
    NVML_SLOW,
    decode_throttle_reasons,
    gpu_health,
)
from agent.gpu.reads import DeviceReads, GpuState, error_name, mib, remap, text
from agent.gpu.xid_events import WAIT_MS, XidEvents, device_address
from agent.sampler import monotonic_ms, wall_ms

__all__ = ["GpuMonitor", "HEALTH_OK", "decode_throttle_reasons", "gpu_health"]

log = logging.getLogger(__name__)

NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_RETRY_MS = 60_000

# SPEC 13's additions to the GPU row, after throttle_reasons.
HARDWARE_EVENT_FIELDS = ("remapped_rows_pending", "remapped_rows_failure", "xid_last", "xid_count")
READING_FIELDS = (
    "memory_used_mb", "memory_total_mb", "memory_free_mb", "temperature_c", "power_w", "power_limit_w",
    "sm_clock_mhz", "mem_clock_mhz", "ecc_uncorrected_volatile", "throttle_reasons",
    "remapped_rows_pending", "remapped_rows_failure",
)
# The utilisation fields of a row that has no reading to show.
NO_UTILIZATION = {
    "utilization_pct": None, "utilization_pct_current": None, "utilization_pct_avg": None,
    "utilization_pct_max": None, "utilization_sample_count": 0, "utilization_sample_ok": False,
    "utilization_sample_quality": "error", "utilization_sample_timestamp_ms": None,
    "utilization_sample_age_ms": None, "utilization_raw_value": None,
}


class GpuMonitor:
    """All GPUs of the host; ``sample()`` returns the snapshot's ``devices.gpu`` list."""

    def __init__(self, nvml=None, window_ms=5000, temp_degraded_c=85.0, clock_ms=monotonic_ms,
                 clock_wall_ms=wall_ms, slow_ms=2000, xid_window_ms=300_000, event_wait_ms=WAIT_MS):
        self._nvml = nvml
        self._window_ms = window_ms
        self._temp_degraded_c = temp_degraded_c
        self._clock_ms = clock_ms
        self._wall_ms = clock_wall_ms
        self.slow_ms = slow_ms
        self._xid_window_ms = xid_window_ms
        self._event_wait_ms = event_wait_ms
        self._events = None
        self._listening = False
        self._gpus = []
        self._initialised = False
        self._retry_at = None
        self.status = "nvml_unavailable: not opened"
        # (GPU index or None, NVML function name, monotonic ms it started):
        # read from the sampler thread by the watchdog while a call runs.
        self.call_in_progress = None

    @property
    def names(self):
        return [gpu.name for gpu in self._gpus]

    def timed_call(self, index, function, *args):
        """``(result, milliseconds taken)``; the call shows in ``call_in_progress`` meanwhile."""
        started = self._clock_ms()
        self.call_in_progress = (index, getattr(function, "__name__", "nvml"), started)
        try:
            value = function(*args)
        finally:
            self.call_in_progress = None
        return value, self._clock_ms() - started

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
            self.timed_call(None, nvml.nvmlInit)
            self._initialised = True
            count, _ = self.timed_call(None, nvml.nvmlDeviceGetCount)
        except nvml.NVMLError as error:
            self._unavailable(str(error))
            return
        except OSError as error:  # a broken libnvidia-ml can fail below pynvml's own checks
            self._unavailable(str(error))
            return
        self._gpus = [GpuState(index, self._window_ms) for index in range(count)]
        if self._gpus:
            if self._events is None:
                self._events = XidEvents(nvml, self._clock_ms, self._xid_window_ms, self._event_wait_ms)
            self._events.open()
        for gpu in self._gpus:
            self._attach(gpu)
        self.status = "ok" if self._gpus else "no_gpu"
        if not self._gpus:
            self.close()
        elif self._listening:
            self._events.start()
        log.info("NVML: %s, GPUs: %s", self.status, ", ".join(str(n) for n in self.names) or "none")

    def listen_for_events(self):
        """Wait for critical XIDs on a thread of their own, from now on and after every re-open."""
        self._listening = True
        if self._events is not None:
            self._events.start()

    def _unavailable(self, reason):
        # A driver that loads after the agent (boot order) is picked up later.
        repeated = self.status == f"nvml_unavailable: {reason}"
        self.status = f"nvml_unavailable: {reason}"
        self._retry_at = self._clock_ms() + NVML_RETRY_MS
        self.close()
        log.log(logging.DEBUG if repeated else logging.WARNING,
                "NVML unavailable (%s); reporting no GPUs, trying again every %d s", reason, NVML_RETRY_MS // 1000)

    def close(self):
        if self._events is not None:
            self._events.stop()  # the event set goes before the library
        if self._initialised:
            self._initialised = False
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError as error:
                log.debug("nvmlShutdown: %s", error)

    def _attach(self, gpu):
        nvml = self._nvml
        try:
            handle, _ = self.timed_call(gpu.index, nvml.nvmlDeviceGetHandleByIndex, gpu.index)
            gpu.uuid = text(self.timed_call(gpu.index, nvml.nvmlDeviceGetUUID, handle)[0])
            gpu.name = text(self.timed_call(gpu.index, nvml.nvmlDeviceGetName, handle)[0])
        except nvml.NVMLError as error:
            code = getattr(error, "value", None)
            gpu.attach_failure = DEVICE_FAILURES.get(code, f"nvml_error:{error_name(error)}")
            return
        gpu.handle = handle
        gpu.attach_failure = None
        if self._events is not None and gpu.watched != device_address(handle):
            self._events.watch(gpu.index, handle)
            gpu.watched = device_address(handle)

    def needs_round(self):
        """Whether ``sample()`` would touch NVML: there are GPUs, or a retry of NVML is due."""
        return bool(self._gpus) or (self._retry_at is not None and self._clock_ms() >= self._retry_at)

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
        reader = DeviceReads(self, gpu)
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
        remap_pending, remap_failure = remap(reader.read("remapped_rows", nvml.nvmlDeviceGetRemappedRows, handle))

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
        health, reasons = gpu_health(None, core_failures, temperature, ecc, throttle, self._temp_degraded_c,
                                     self._xid_codes(gpu.index, now), remap_failure, bool(reader.slow))
        if reader.slow:
            log.warning("GPU %d: NVML took over %d ms for %s", gpu.index, self.slow_ms, ", ".join(reader.slow))
        return self._entry(gpu, now, utilization, quality, error, health, reasons, {
            "memory_used_mb": mib(memory.used) if memory is not None else None,
            "memory_total_mb": mib(memory.total) if memory is not None else None,
            "memory_free_mb": mib(memory.free) if memory is not None else None,
            "temperature_c": temperature,
            "power_w": None if power_mw is None else round(power_mw / 1000.0, 1),
            "power_limit_w": None if limit_mw is None else round(limit_mw / 1000.0, 1),
            "sm_clock_mhz": sm_clock,
            "mem_clock_mhz": mem_clock,
            "ecc_uncorrected_volatile": ecc,
            "throttle_reasons": throttle,
            "remapped_rows_pending": remap_pending,
            "remapped_rows_failure": remap_failure,
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

    def _xid_codes(self, index, now):
        return [] if self._events is None else self._events.recent_codes(index, now)

    def _xid_fields(self, index):
        if self._events is None:
            return {"xid_last": None, "xid_count": None}
        return self._events.fields(index)

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
            **self._xid_fields(gpu.index),
            "health": health,
            "health_reasons": reasons,
        }

    def _failed_entry(self, gpu, now, failure):
        # Samples from before the failure describe a device that is gone.
        gpu.window.clear()
        health, reasons = gpu_health(failure, xid_codes=self._xid_codes(gpu.index, now))
        return self._entry(gpu, now, None, "error", failure, health, reasons, dict.fromkeys(READING_FIELDS))

    def stalled_entry(self, row):
        """``row`` (the GPU's last one) as it must read while an NVML call hangs: nothing known, never ok.

        Called from the sampler thread while this monitor's own thread is
        stuck; it touches only the row, the XID log and the clocks.
        """
        index = row["index"]
        health, reasons = gpu_health(xid_codes=self._xid_codes(index, self._clock_ms()), nvml_slow=True)
        stalled = dict(row)
        stalled.update(NO_UTILIZATION)
        stalled.update(dict.fromkeys(READING_FIELDS))
        stalled.update(self._xid_fields(index))
        stalled.update({"utilization_error": NVML_SLOW, "health": health, "health_reasons": reasons})
        return stalled

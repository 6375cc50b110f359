"""Critical XID errors through NVML's event API, listened to in the background (SPEC 13).

An XID is the driver's report of a GPU fault (79: fallen off the bus, 48:
double-bit ECC, 94/95: contained/uncontained memory errors, ...). NVML
delivers the critical ones as events: the agent creates one event set,
registers every GPU for ``nvmlEventTypeXidCriticalError`` and a thread
waits on the set (``nvmlEventSetWait_v2``, which blocks in the driver and
raises ``NVMLError_Timeout`` when nothing came within its timeout, so the
thread notices a stop request within one timeout). Each XID is counted on
its GPU; one within the last ``window_ms`` keeps the GPU's health at
``error`` (``xid_<code>``).

A GPU whose registration NVML refuses (``NotSupported``: vGPU guests, WSL)
or a driver without the event API gives ``xid_count`` null: not listened to
is not "no errors".
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections import deque

from agent.gpu.health import NVML_ERROR_TIMEOUT

log = logging.getLogger(__name__)

# nvmlEventTypeXidCriticalError in nvml.h (pynvml exports the same value).
XID_CRITICAL_ERROR = 0x0000000000000008
WAIT_MS = 1000
RECENT_PER_GPU = 64


def device_address(handle):
    """The device pointer's value: NVML hands back the same pointer in event data as from GetHandle."""
    try:
        return ctypes.cast(handle, ctypes.c_void_p).value
    except (ctypes.ArgumentError, TypeError):
        return None


class XidEvents:
    """The critical XIDs of every GPU since the agent started, and the thread that hears them."""

    def __init__(self, nvml, clock_ms, window_ms=300_000, wait_ms=WAIT_MS):
        self._nvml = nvml
        self._clock_ms = clock_ms
        self.window_ms = window_ms
        self._wait_ms = wait_ms
        self._lock = threading.Lock()
        # Kept across NVML re-opens: the counts are "since the agent started".
        self._counts = {}  # GPU index -> XIDs seen
        self._last = {}  # GPU index -> newest XID code
        self._recent = {}  # GPU index -> deque of (monotonic ms, code)
        # Of the current NVML session.
        self._listened = set()  # GPU indexes registered for XID events
        self._devices = {}  # device pointer value -> GPU index
        self._event_set = None
        self._stop = threading.Event()
        self._thread = None
        self.unavailable = None  # why the event API cannot be used on this host, if so

    def open(self):
        """Create the event set (after each ``nvmlInit``); then ``watch`` each GPU and ``start``."""
        nvml = self._nvml
        with self._lock:
            self._listened, self._devices = set(), {}
        self.unavailable = None
        try:
            self._event_set = nvml.nvmlEventSetCreate()
        except (nvml.NVMLError, AttributeError) as error:
            self.unavailable = str(error) or type(error).__name__
            log.warning("NVML events unavailable (%s): critical XIDs are not listened to", self.unavailable)

    def watch(self, index, handle):
        """Register one GPU for critical XIDs (again after it was attached anew)."""
        if self._event_set is None:
            return
        nvml = self._nvml
        try:
            nvml.nvmlDeviceRegisterEvents(handle, XID_CRITICAL_ERROR, self._event_set)
        except nvml.NVMLError as error:
            log.warning("GPU %d: NVML refuses XID events (%s); its xid_count is null", index, error)
            return
        with self._lock:
            self._devices[device_address(handle)] = index
            self._listened.add(index)

    def start(self):
        if self._event_set is None or self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="fleetwatch-xid", daemon=True)
        self._thread.start()

    def stop(self):
        """Stop listening and free the event set (before ``nvmlShutdown``)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self._wait_ms / 1000.0 + 1.0)
            if self._thread.is_alive():
                log.warning("the XID listener did not stop; its event set is left to nvmlShutdown")
                self._event_set = None
            self._thread = None
        if self._event_set is not None:
            try:
                self._nvml.nvmlEventSetFree(self._event_set)
            except self._nvml.NVMLError as error:
                log.debug("nvmlEventSetFree: %s", error)
            self._event_set = None

    def record(self, index, code, at_ms):
        with self._lock:
            self._counts[index] = self._counts.get(index, 0) + 1
            self._last[index] = code
            self._recent.setdefault(index, deque(maxlen=RECENT_PER_GPU)).append((at_ms, code))
        log.error("GPU %s: critical XID %d", index, code)

    def fields(self, index):
        """``xid_last`` and ``xid_count`` of a GPU row; both null where it is not listened to."""
        with self._lock:
            if index not in self._listened:
                return {"xid_last": None, "xid_count": None}
            return {"xid_last": self._last.get(index), "xid_count": self._counts.get(index, 0)}

    def recent_codes(self, index, now_ms):
        """The distinct XID codes of the last ``window_ms``, newest first."""
        with self._lock:
            recent = list(self._recent.get(index, ()))
        codes = [code for at, code in reversed(recent) if now_ms - at < self.window_ms]
        return list(dict.fromkeys(codes))

    def _run(self):
        nvml = self._nvml
        wait = getattr(nvml, "nvmlEventSetWait_v2", None) or nvml.nvmlEventSetWait
        failing = None
        while not self._stop.is_set():
            try:
                data = wait(self._event_set, self._wait_ms)
            except nvml.NVMLError as error:
                if getattr(error, "value", None) == NVML_ERROR_TIMEOUT:
                    continue
                if str(error) != failing:
                    failing = str(error)
                    log.warning("waiting for NVML events failed (%s); trying again", error)
                self._stop.wait(self._wait_ms / 1000.0)  # no busy loop on a persistent failure
                continue
            failing = None
            if data.eventType & XID_CRITICAL_ERROR:
                with self._lock:
                    index = self._devices.get(device_address(data.device))
                if index is None:
                    log.error("critical XID %d on a device this agent does not list", data.eventData)
                    continue
                self.record(index, int(data.eventData), self._clock_ms())

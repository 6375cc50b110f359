"""One GPU's reads through NVML: a round of calls that stops at a device failure, and the values' units.

``DeviceReads`` applies the monitor's reading rules (``monitor.py``) to one
device for one round: an unsupported value is null and not asked for again, a
device-level failure stops the round, a slow call is noted.
"""

from __future__ import annotations

from agent.gpu.health import DEVICE_FAILURES, NOT_AVAILABLE, UNSUPPORTED_CODES, UtilizationWindow
from agent.sampler import MIB


def error_name(error):
    name = type(error).__name__
    return name[len("NVMLError_"):] if name.startswith("NVMLError_") else f"code_{getattr(error, 'value', '?')}"


class DeviceReads:
    """One round of reads on one device; stops asking after a device-level failure."""

    def __init__(self, monitor, gpu):
        self._monitor = monitor
        self._nvml = monitor._nvml
        self._gpu = gpu
        self.device_failure = None
        self.failed = {}  # field -> short error name
        self.slow = []  # fields whose call took longer than the monitor's slow_ms

    def read(self, field, function, *args):
        if self.device_failure or field in self._gpu.unsupported:
            return None
        try:
            value, took_ms = self._monitor.timed_call(self._gpu.index, function, *args)
        except self._nvml.NVMLError as error:
            code = getattr(error, "value", None)
            if code in UNSUPPORTED_CODES:
                self._gpu.unsupported.add(field)
            elif code in DEVICE_FAILURES:
                self.device_failure = DEVICE_FAILURES[code]
            else:
                self.failed[field] = error_name(error)
            return None
        if took_ms > self._monitor.slow_ms:
            self.slow.append(field)
        if isinstance(value, int) and value in NOT_AVAILABLE:
            return None
        return value


class GpuState:
    """What the monitor keeps of one GPU between rounds: its handle, names, what it does not support, its window."""

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
        self.watched = None  # address of the handle registered for XID events


def text(value):
    # nvidia-ml-py decodes strings; pynvml releases before 11.x returned bytes.
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def mib(value):
    return None if value is None else round(value / MIB, 1)


def remap(rows):
    """``(pending, failure)`` of nvmlDeviceGetRemappedRows' (corrected, uncorrected, pending, failure)."""
    if rows is None:
        return None, None
    return bool(rows[2]), bool(rows[3])

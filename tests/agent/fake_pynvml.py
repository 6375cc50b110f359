"""A fake ``pynvml`` (nvidia-ml-py) that behaves like the real module on a GPU host.

It is built from the real module's own parts wherever they do not touch the
driver: the ``NVMLError`` class and its per-code subclasses (so ``except
pynvml.NVMLError_NotSupported`` and ``error.value`` work exactly as on a real
host), the ctypes structures returned for utilisation and memory, and the
constants. Only the functions that would call ``libnvidia-ml.so`` are
replaced, with the same names and signatures (``test_fake_pynvml`` checks
that against the installed nvidia-ml-py).

Behaviours copied from the real library:

- every device call before ``nvmlInit`` raises ``NVMLError_Uninitialized``;
- ``nvmlInit`` on a host without the driver raises
  ``NVMLError_LibraryNotFound`` (``init_error``);
- a query the board does not support raises ``NVMLError_NotSupported``
  (ECC on GeForce boards, utilisation on MIG-enabled GPUs, power on some);
- drivers before R535 lack ``nvmlDeviceGetCurrentClocksEventReasons``, which
  pynvml reports as ``NVMLError_FunctionNotFound``;
- a GPU that fell off the bus answers ``NVMLError_GpuIsLost`` to everything;
- device handles are real ``c_nvmlDevice_t`` pointers, and
  ``nvmlEventSetWait_v2`` hands back a ``c_nvmlEventData_t`` holding the
  same pointer, as the library does; with no event pending it blocks up to
  its timeout and raises ``NVMLError_Timeout``; a board without XID events
  (``not_supported`` holding ``nvmlDeviceRegisterEvents``) refuses the
  registration with ``NVMLError_NotSupported``;
- ``nvmlDeviceGetRemappedRows`` answers ``(corrected, uncorrected, pending,
  failure)``; boards before Ampere answer ``NotSupported``;
- ``hang`` makes one function block until the test releases it, as a call
  into a wedged driver does; ``slow`` makes one take that many milliseconds
  of the test's clock.
"""

from __future__ import annotations

import ctypes
import threading
from collections import Counter
from dataclasses import dataclass, field

import pynvml as _real

GIB = 1024 ** 3

# The real error machinery and result types.
NVMLError = _real.NVMLError
c_nvmlUtilization_t = _real.c_nvmlUtilization_t
c_nvmlMemory_t = _real.c_nvmlMemory_t
c_nvmlEventData_t = _real.c_nvmlEventData_t
# What NVML writes into a uint it has no value for (unsigned -1).
NVML_VALUE_NOT_AVAILABLE_uint = 0xFFFFFFFF

# Constants and error classes the fake resolves from the real module.
_EXPORTED = frozenset(name for name in dir(_real) if name.startswith((
    "NVMLError_", "NVML_ERROR_", "NVML_SUCCESS", "NVML_TEMPERATURE_", "NVML_CLOCK_", "NVML_MEMORY_ERROR_TYPE_",
    "NVML_VOLATILE_ECC", "NVML_AGGREGATE_ECC", "nvmlClocksEventReason", "nvmlClocksThrottleReason",
    "nvmlEventType")))


@dataclass
class FakeGpu:
    """One board. Raw units as NVML gives them: bytes, milliwatts, MHz, °C."""

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    utilization: int = 0
    memory_utilization: int = 0
    memory_total: int = 80 * GIB
    memory_used: int = 1 * GIB
    temperature_c: int = 40
    power_mw: int = 120_000
    power_limit_mw: int = 700_000
    sm_clock_mhz: int = 1980
    mem_clock_mhz: int = 2619
    ecc_uncorrected_volatile: int = 0
    clocks_event_mask: int = 0x1  # idle
    # NVML function names this board answers NOT_SUPPORTED to.
    not_supported: set = field(default_factory=set)
    # NVML function name -> error code it raises now (a transient fault).
    failing: dict = field(default_factory=dict)
    lost: bool = False
    # nvmlDeviceGetRemappedRows: (corrected rows, uncorrected rows, remap pending, remap failure).
    remapped_rows: tuple = (0, 0, 0, 0)


def geforce_gpu(**overrides):
    """A consumer board: no ECC, no enforced power limit query on some models."""
    settings = {"name": "NVIDIA GeForce RTX 4090", "uuid": "GPU-4090", "memory_total": 24 * GIB,
                "not_supported": {"nvmlDeviceGetTotalEccErrors"}}
    settings.update(overrides)
    return FakeGpu(**settings)


def volta_gpu(**overrides):
    """A V100: no row remapping (it retires pages instead), so that query is not supported."""
    settings = {"name": "Tesla V100-SXM2-32GB", "uuid": "GPU-v100", "memory_total": 32 * GIB,
                "not_supported": {"nvmlDeviceGetRemappedRows"}}
    settings.update(overrides)
    return FakeGpu(**settings)


def mig_gpu(**overrides):
    """A MIG-enabled A100: the parent device has no utilisation counters."""
    settings = {"name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-a100", "memory_total": 40 * GIB,
                "not_supported": {"nvmlDeviceGetUtilizationRates"}}
    settings.update(overrides)
    return FakeGpu(**settings)


def _device_pointer():
    """A real, distinct ``c_nvmlDevice_t``: the type NVML's handles and event data have."""
    return ctypes.pointer(_real.struct_c_nvmlDevice_t())


def _address(pointer):
    return ctypes.cast(pointer, ctypes.c_void_p).value


class FakeNvml:
    """Module-like object: pass it wherever the agent takes the ``pynvml`` module."""

    NVMLError = NVMLError

    def __init__(self, gpus=(), init_error=None, has_clocks_event_reasons=True, driver_version="550.54.15",
                 clock=None, has_events=True):
        self.gpus = list(gpus)
        self.init_error = init_error
        self.has_clocks_event_reasons = has_clocks_event_reasons
        self.has_events = has_events
        self.driver_version = driver_version
        self.initialised = 0
        self.calls = Counter()
        self.clock = clock  # a tests' FakeClock that ``slow`` calls move forward
        self.slow = {}  # function name -> milliseconds each call takes on ``clock``
        self.hang = {}  # function name -> threading.Event the call waits on
        self._handles = [_device_pointer() for _ in self.gpus]
        self._index = {_address(handle): index for index, handle in enumerate(self._handles)}
        self._events = threading.Condition()
        self._event_sets = {}  # address -> {"set": pointer, "devices": {index: mask}, "pending": [data]}

    def __getattr__(self, name):
        # Constants and error classes resolve exactly as on the real module.
        if name in _EXPORTED:
            return getattr(_real, name)
        raise AttributeError(name)

    # --- library -----------------------------------------------------------------

    def nvmlInit(self):
        self.calls["nvmlInit"] += 1
        if self.init_error is not None:
            raise NVMLError(self.init_error)
        self.initialised += 1

    def nvmlShutdown(self):
        self.calls["nvmlShutdown"] += 1
        self._need_init()
        self.initialised -= 1

    def nvmlSystemGetDriverVersion(self):
        self._need_init()
        return self.driver_version

    def nvmlDeviceGetCount(self):
        self.calls["nvmlDeviceGetCount"] += 1
        self._need_init()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        self.calls["nvmlDeviceGetHandleByIndex"] += 1
        self._delay("nvmlDeviceGetHandleByIndex")
        self._need_init()
        if not 0 <= index < len(self.gpus):
            raise NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)
        if self.gpus[index].lost:
            raise NVMLError(_real.NVML_ERROR_GPU_IS_LOST)
        return self._handles[index]

    # --- per device ----------------------------------------------------------------

    def nvmlDeviceGetUUID(self, handle):
        return self._device("nvmlDeviceGetUUID", handle).uuid

    def nvmlDeviceGetName(self, handle):
        return self._device("nvmlDeviceGetName", handle).name

    def nvmlDeviceGetUtilizationRates(self, handle):
        gpu = self._device("nvmlDeviceGetUtilizationRates", handle)
        rates = c_nvmlUtilization_t()
        rates.gpu, rates.memory = gpu.utilization, gpu.memory_utilization
        return rates

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        gpu = self._device("nvmlDeviceGetMemoryInfo", handle)
        memory = c_nvmlMemory_t()
        memory.total, memory.used = gpu.memory_total, gpu.memory_used
        memory.free = gpu.memory_total - gpu.memory_used
        return memory

    def nvmlDeviceGetTemperature(self, handle, sensor):
        gpu = self._device("nvmlDeviceGetTemperature", handle)
        if sensor != _real.NVML_TEMPERATURE_GPU:
            raise NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)
        return gpu.temperature_c

    def nvmlDeviceGetPowerUsage(self, handle):
        return self._device("nvmlDeviceGetPowerUsage", handle).power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return self._device("nvmlDeviceGetEnforcedPowerLimit", handle).power_limit_mw

    def nvmlDeviceGetClockInfo(self, handle, type):  # noqa: A002 - the real parameter name
        gpu = self._device("nvmlDeviceGetClockInfo", handle)
        if type == _real.NVML_CLOCK_SM:
            return gpu.sm_clock_mhz
        if type == _real.NVML_CLOCK_MEM:
            return gpu.mem_clock_mhz
        raise NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetTotalEccErrors(self, handle, errorType, counterType):  # noqa: N803 - real names
        gpu = self._device("nvmlDeviceGetTotalEccErrors", handle)
        if errorType == _real.NVML_MEMORY_ERROR_TYPE_UNCORRECTED and counterType == _real.NVML_VOLATILE_ECC:
            return gpu.ecc_uncorrected_volatile
        return 0

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        if not self.has_clocks_event_reasons:
            self.calls["nvmlDeviceGetCurrentClocksEventReasons"] += 1
            raise NVMLError(_real.NVML_ERROR_FUNCTION_NOT_FOUND)
        return self._device("nvmlDeviceGetCurrentClocksEventReasons", handle).clocks_event_mask

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        return self._device("nvmlDeviceGetCurrentClocksThrottleReasons", handle).clocks_event_mask

    def nvmlDeviceGetRemappedRows(self, device):
        return tuple(self._device("nvmlDeviceGetRemappedRows", device).remapped_rows)

    # --- events --------------------------------------------------------------------

    def nvmlEventSetCreate(self):
        self.calls["nvmlEventSetCreate"] += 1
        self._need_init()
        if not self.has_events:
            raise NVMLError(_real.NVML_ERROR_FUNCTION_NOT_FOUND)
        event_set = ctypes.pointer(_real.struct_c_nvmlEventSet_t())
        with self._events:
            self._event_sets[_address(event_set)] = {"set": event_set, "devices": {}, "pending": []}
        return event_set

    def nvmlDeviceGetSupportedEventTypes(self, handle):
        gpu = self._device("nvmlDeviceGetSupportedEventTypes", handle)
        if "nvmlDeviceRegisterEvents" in gpu.not_supported:
            return _real.nvmlEventTypeAll & ~_real.nvmlEventTypeXidCriticalError
        return _real.nvmlEventTypeAll

    def nvmlDeviceRegisterEvents(self, handle, eventTypes, eventSet):  # noqa: N803 - real names
        gpu = self._device("nvmlDeviceRegisterEvents", handle)
        with self._events:
            entry = self._event_set(eventSet)
            entry["devices"][self.gpus.index(gpu)] = eventTypes

    def nvmlEventSetWait_v2(self, eventSet, timeoutms):  # noqa: N802, N803 - real names
        self.calls["nvmlEventSetWait_v2"] += 1
        self._need_init()
        with self._events:
            entry = self._event_set(eventSet)
            if not self._events.wait_for(lambda: entry["pending"], timeoutms / 1000.0):
                raise NVMLError(_real.NVML_ERROR_TIMEOUT)
            return entry["pending"].pop(0)

    def nvmlEventSetWait(self, eventSet, timeoutms):  # noqa: N803 - real names
        return self.nvmlEventSetWait_v2(eventSet, timeoutms)

    def nvmlEventSetFree(self, eventSet):  # noqa: N803 - real names
        self.calls["nvmlEventSetFree"] += 1
        with self._events:
            self._event_set(eventSet)
            del self._event_sets[_address(eventSet)]

    def raise_xid(self, index, code):
        """The driver reports critical XID ``code`` on GPU ``index`` to every set registered for it."""
        with self._events:
            for entry in self._event_sets.values():
                if entry["devices"].get(index, 0) & _real.nvmlEventTypeXidCriticalError:
                    data = c_nvmlEventData_t()
                    data.device = self._handles[index]
                    data.eventType = _real.nvmlEventTypeXidCriticalError
                    data.eventData = code
                    entry["pending"].append(data)
            self._events.notify_all()

    def registered(self, index):
        """Whether GPU ``index`` is registered for critical XIDs in a live event set."""
        with self._events:
            return any(entry["devices"].get(index, 0) & _real.nvmlEventTypeXidCriticalError
                       for entry in self._event_sets.values())

    # --- internals ---------------------------------------------------------------

    def _need_init(self):
        if self.initialised <= 0:
            raise NVMLError(_real.NVML_ERROR_UNINITIALIZED)

    def _event_set(self, event_set):
        try:
            return self._event_sets[_address(event_set)]
        except (KeyError, ctypes.ArgumentError, TypeError):
            raise NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT) from None

    def _delay(self, function):
        if function in self.hang:
            self.hang[function].wait()
        if function in self.slow and self.clock is not None:
            self.clock.advance(self.slow[function])

    def _device(self, function, handle):
        self.calls[function] += 1
        self._delay(function)
        self._need_init()
        try:
            index = self._index[_address(handle)]
        except (KeyError, ctypes.ArgumentError, TypeError):
            raise NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT) from None
        gpu = self.gpus[index]
        if gpu.lost:
            raise NVMLError(_real.NVML_ERROR_GPU_IS_LOST)
        if function in gpu.failing:
            raise NVMLError(gpu.failing[function])
        if function in gpu.not_supported:
            raise NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)
        return gpu

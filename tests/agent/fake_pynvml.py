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
- a GPU that fell off the bus answers ``NVMLError_GpuIsLost`` to everything.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pynvml as _real

GIB = 1024 ** 3

# The real error machinery and result types.
NVMLError = _real.NVMLError
c_nvmlUtilization_t = _real.c_nvmlUtilization_t
c_nvmlMemory_t = _real.c_nvmlMemory_t
# What NVML writes into a uint it has no value for (unsigned -1).
NVML_VALUE_NOT_AVAILABLE_uint = 0xFFFFFFFF

# Constants and error classes the fake resolves from the real module.
_EXPORTED = frozenset(name for name in dir(_real) if name.startswith((
    "NVMLError_", "NVML_ERROR_", "NVML_SUCCESS", "NVML_TEMPERATURE_", "NVML_CLOCK_", "NVML_MEMORY_ERROR_TYPE_",
    "NVML_VOLATILE_ECC", "NVML_AGGREGATE_ECC", "nvmlClocksEventReason", "nvmlClocksThrottleReason")))


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


def geforce_gpu(**overrides):
    """A consumer board: no ECC, no enforced power limit query on some models."""
    settings = {"name": "NVIDIA GeForce RTX 4090", "uuid": "GPU-4090", "memory_total": 24 * GIB,
                "not_supported": {"nvmlDeviceGetTotalEccErrors"}}
    settings.update(overrides)
    return FakeGpu(**settings)


def mig_gpu(**overrides):
    """A MIG-enabled A100: the parent device has no utilisation counters."""
    settings = {"name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-a100", "memory_total": 40 * GIB,
                "not_supported": {"nvmlDeviceGetUtilizationRates"}}
    settings.update(overrides)
    return FakeGpu(**settings)


class _Handle:
    """Opaque like the real ``c_nvmlDevice_t`` pointer; only identity matters."""

    def __init__(self, index):
        self.index = index

    def __repr__(self):
        return f"<fake nvmlDevice {self.index}>"


class FakeNvml:
    """Module-like object: pass it wherever the agent takes the ``pynvml`` module."""

    NVMLError = NVMLError

    def __init__(self, gpus=(), init_error=None, has_clocks_event_reasons=True, driver_version="550.54.15"):
        self.gpus = list(gpus)
        self.init_error = init_error
        self.has_clocks_event_reasons = has_clocks_event_reasons
        self.driver_version = driver_version
        self.initialised = 0
        self.calls = Counter()
        self._handles = [_Handle(i) for i in range(len(self.gpus))]

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

    # --- internals ---------------------------------------------------------------

    def _need_init(self):
        if self.initialised <= 0:
            raise NVMLError(_real.NVML_ERROR_UNINITIALIZED)

    def _device(self, function, handle):
        self.calls[function] += 1
        self._need_init()
        if not isinstance(handle, _Handle):
            raise NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)
        gpu = self.gpus[handle.index]
        if gpu.lost:
            raise NVMLError(_real.NVML_ERROR_GPU_IS_LOST)
        if function in gpu.failing:
            raise NVMLError(gpu.failing[function])
        if function in gpu.not_supported:
            raise NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)
        return gpu

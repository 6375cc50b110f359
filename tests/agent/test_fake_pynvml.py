"""The fake NVML must stay a faithful stand-in for the installed nvidia-ml-py."""

import ctypes
import inspect

import pynvml
import pytest

from tests.agent.fake_pynvml import FakeGpu, FakeNvml, volta_gpu

FAKED = [name for name, member in inspect.getmembers(FakeNvml, inspect.isfunction) if name.startswith("nvml")]


def test_it_fakes_the_functions_the_agent_calls():
    assert {"nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex",
            "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetTemperature",
            "nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetClockInfo",
            "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetCurrentClocksEventReasons",
            "nvmlDeviceGetCurrentClocksThrottleReasons", "nvmlDeviceGetRemappedRows", "nvmlEventSetCreate",
            "nvmlDeviceRegisterEvents", "nvmlEventSetWait_v2", "nvmlEventSetFree"} <= set(FAKED)


@pytest.mark.parametrize("name", FAKED)
def test_it_gives_each_fake_function_the_real_signature(name):
    fake = inspect.signature(getattr(FakeNvml([]), name))
    real = inspect.signature(getattr(pynvml, name))
    assert list(fake.parameters) == list(real.parameters)
    assert [p.default for p in fake.parameters.values()] == [p.default for p in real.parameters.values()]


def test_it_raises_the_real_error_classes_with_the_real_codes():
    nvml = FakeNvml([FakeGpu(not_supported={"nvmlDeviceGetPowerUsage"})])
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported) as error:
        nvml.nvmlDeviceGetPowerUsage(handle)
    assert error.value.value == pynvml.NVML_ERROR_NOT_SUPPORTED == 3
    assert str(error.value) == "Not Supported"
    assert nvml.NVMLError is pynvml.NVMLError
    assert nvml.NVMLError_GpuIsLost is pynvml.NVMLError_GpuIsLost


def test_it_answers_with_the_real_structures():
    nvml = FakeNvml([FakeGpu(utilization=37, memory_total=100, memory_used=40)])
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    rates = nvml.nvmlDeviceGetUtilizationRates(handle)
    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
    assert isinstance(rates, pynvml.c_nvmlUtilization_t) and rates.gpu == 37
    assert isinstance(memory, pynvml.c_nvmlMemory_t)
    assert (memory.total, memory.used, memory.free) == (100, 40, 60)


def test_it_fails_calls_before_init_as_uninitialized_like_the_real_module():
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlDeviceGetCount()  # real module, library never loaded
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        FakeNvml([FakeGpu()]).nvmlDeviceGetCount()


def test_it_fails_init_without_the_driver_like_the_real_module():
    nvml = FakeNvml(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    with pytest.raises(pynvml.NVMLError_LibraryNotFound) as error:
        nvml.nvmlInit()
    assert str(error.value) == "NVML Shared Library Not Found"


def test_it_answers_gpu_is_lost_to_everything_for_a_lost_gpu():
    gpu = FakeGpu()
    nvml = FakeNvml([gpu])
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    gpu.lost = True
    for call in (lambda: nvml.nvmlDeviceGetUtilizationRates(handle), lambda: nvml.nvmlDeviceGetHandleByIndex(0)):
        with pytest.raises(pynvml.NVMLError_GpuIsLost):
            call()


def test_it_hands_out_real_device_pointers_and_real_event_data():
    nvml = FakeNvml([FakeGpu(), FakeGpu(uuid="GPU-b")])
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(1)
    assert isinstance(handle, pynvml.c_nvmlDevice_t)
    event_set = nvml.nvmlEventSetCreate()
    assert isinstance(event_set, pynvml.c_nvmlEventSet_t)
    nvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, event_set)
    nvml.raise_xid(1, 79)
    data = nvml.nvmlEventSetWait_v2(event_set, 1000)
    assert isinstance(data, pynvml.c_nvmlEventData_t)
    assert (data.eventType, data.eventData) == (pynvml.nvmlEventTypeXidCriticalError, 79)
    assert ctypes.cast(data.device, ctypes.c_void_p).value == ctypes.cast(handle, ctypes.c_void_p).value
    nvml.nvmlEventSetFree(event_set)


def test_it_times_out_an_event_wait_with_the_real_error():
    nvml = FakeNvml([FakeGpu()])
    nvml.nvmlInit()
    event_set = nvml.nvmlEventSetCreate()
    with pytest.raises(pynvml.NVMLError_Timeout) as error:
        nvml.nvmlEventSetWait_v2(event_set, 1)
    assert error.value.value == pynvml.NVML_ERROR_TIMEOUT == 10


def test_it_refuses_events_and_remapping_where_the_board_does_not_have_them():
    nvml = FakeNvml([volta_gpu(not_supported={"nvmlDeviceGetRemappedRows", "nvmlDeviceRegisterEvents"})])
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetRemappedRows(handle)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, nvml.nvmlEventSetCreate())
    assert FakeNvml([FakeGpu(remapped_rows=(1, 2, 1, 0))]).gpus[0].remapped_rows == (1, 2, 1, 0)


def test_it_fails_a_handle_that_is_not_its_own_as_the_real_module_does():
    nvml = FakeNvml([FakeGpu()])
    nvml.nvmlInit()
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetPowerUsage(ctypes.pointer(pynvml.struct_c_nvmlDevice_t()))

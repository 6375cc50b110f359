"""``bench/gpu_check.py``'s verdicts, on the real H200 row it recorded and on rows altered from it."""

import json
from pathlib import Path

import pytest

from agent.gpu.monitor import GpuMonitor
from bench import gpu_check
from tests.agent.conftest import FakeClock
from tests.agent.fake_pynvml import FakeGpu, FakeNvml, volta_gpu

[RECORDED] = json.loads((Path(__file__).parent / "data" / "h200-snapshot.json").read_text())["devices"]["gpu"]
# The row was recorded before SPEC 13; its hardware-event fields as the agent writes them for a healthy
# H200 (remapping supported, nothing pending, listening for XIDs, none seen).
H200_ROW = {**RECORDED, "remapped_rows_pending": False, "remapped_rows_failure": False, "xid_last": None,
            "xid_count": 0}
PROPERTIES = list(gpu_check.SMI_PROPERTIES.values())


def smi_row(**changed):
    """nvidia-smi's CSV reading of the recorded row (None: N/A), with ``changed`` properties."""
    row = {"index": "0", "uuid": H200_ROW["uuid"], "name": "NVIDIA H200", "utilization.gpu": "59",
           "memory.used": "1498", "memory.total": "143771", "memory.free": "142273", "temperature.gpu": "50",
           "power.draw": "655.10", "enforced.power.limit": "700.00", "clocks.sm": "1845", "clocks.mem": "3201",
           "ecc.errors.uncorrected.volatile.total": "0", "clocks_event_reasons.active": "0x0000000000000004"}
    row.update(changed)
    return row


def verdicts(gpu, row, capsys):
    checks = gpu_check.Checks()
    gpu_check.compare(checks, "t", [gpu], [row], PROPERTIES)
    return checks.failed, capsys.readouterr().out


def test_it_passes_the_row_as_recorded(capsys):
    failed, out = verdicts(H200_ROW, smi_row(), capsys)
    assert failed == 0, out
    assert "throttle_reasons agrees" in out and "power_limit_w agrees" in out


@pytest.mark.parametrize(("gpu_change", "smi_change", "failing"), [
    ({"temperature_c": None}, {}, "temperature_c: null exactly where"),       # filled in nvidia-smi, null here
    ({}, {"clocks.sm": None}, "sm_clock_mhz: null exactly where"),            # N/A there, a number here
    ({"temperature_c": 60}, {}, "temperature_c agrees"),                      # off by 10 °C
    ({"memory_total_mb": 81559.0}, {}, "memory_total_mb agrees"),
    ({}, {"clocks_event_reasons.active": "0x0000000000000001"}, "throttle_reasons agrees"),
    ({"uuid": "GPU-other"}, {}, "uuid agrees"),
])
def test_it_fails_a_reading_that_disagrees_with_nvidia_smi(gpu_change, smi_change, failing, capsys):
    failed, out = verdicts({**H200_ROW, **gpu_change}, smi_row(**smi_change), capsys)
    assert failed == 1
    assert f"FAIL  t GPU 0 {failing}" in out


def test_it_fails_a_row_missing_a_spec_field(capsys):
    row = dict(H200_ROW)
    del row["utilization_raw_value"]
    failed, out = verdicts(row, smi_row(), capsys)
    assert failed == 1
    assert "FAIL  t GPU 0: every SPEC 2.2 field present  (utilization_raw_value)" in out
    failed, out = verdicts(RECORDED, smi_row(), capsys)
    assert failed == 1
    assert ("FAIL  t GPU 0: every SPEC 13 hardware-event field present  (remapped_rows_pending, "
            "remapped_rows_failure, xid_last, xid_count)") in out


def agent_rows(nvml):
    """The agent's own rows for the fake boards, as ``--once`` would print them."""
    gpus = GpuMonitor(nvml, clock_ms=FakeClock().ms)
    gpus.open()
    rows = gpus.sample()
    gpus.close()
    return rows


def hardware_verdicts(nvml, rows, capsys):
    checks = gpu_check.Checks()
    gpu_check.hardware_event_checks(checks, nvml, rows)
    return checks.failed, capsys.readouterr().out


def test_it_passes_the_event_api_and_remapping_of_healthy_boards(capsys):
    nvml = FakeNvml([FakeGpu(remapped_rows=(2, 0, 1, 0)), volta_gpu()])
    failed, out = hardware_verdicts(nvml, agent_rows(nvml), capsys)
    assert failed == 0, out
    assert "PASS  a wait with no event times out with NVMLError_Timeout" in out
    assert "PASS  GPU 1: remapped_rows_pending/_failure agree with NVML  (agent (None, None), NVML (None, None))" in out
    assert nvml.initialised == 0 and not nvml._event_sets  # initialised, set freed, shut down again


def test_it_fails_a_remap_reading_that_disagrees_with_nvml(capsys):
    nvml = FakeNvml([FakeGpu(remapped_rows=(0, 4, 0, 1))])
    [row] = agent_rows(nvml)
    failed, out = hardware_verdicts(nvml, [{**row, "remapped_rows_failure": False}], capsys)
    assert failed == 1
    assert "FAIL  GPU 0: remapped_rows_pending/_failure agree with NVML  (agent (False, False), NVML (False, True))" in out


def test_it_fails_a_host_whose_driver_has_no_event_api(capsys):
    nvml = FakeNvml([FakeGpu()], has_events=False)
    failed, out = hardware_verdicts(nvml, agent_rows(nvml), capsys)
    assert failed == 1 and "FAIL  NVML creates an event set" in out
    assert "PASS  GPU 0: xid_count null" in out  # the agent said it could not listen


def test_it_fails_a_board_that_refuses_xid_events(capsys):
    nvml = FakeNvml([FakeGpu(not_supported={"nvmlDeviceRegisterEvents"})])
    failed, out = hardware_verdicts(nvml, agent_rows(nvml), capsys)
    assert failed == 2
    assert "FAIL  GPU 0: critical XID events supported" in out and "FAIL  GPU 0: registers for critical" in out


class XidDuringCheck(FakeNvml):
    """A host where a real XID arrives while the check waits."""

    def nvmlDeviceRegisterEvents(self, handle, eventTypes, eventSet):  # noqa: N803 - real names
        super().nvmlDeviceRegisterEvents(handle, eventTypes, eventSet)
        self.raise_xid(0, 79)


def test_it_reports_an_event_that_came_during_the_wait(capsys):
    nvml = XidDuringCheck([FakeGpu()])
    failed, out = hardware_verdicts(nvml, agent_rows(FakeNvml([FakeGpu()])), capsys)
    assert failed == 1 and "an event came: type 0x8, data 79" in out


def test_it_fails_a_row_the_agent_read_too_slowly(capsys):
    nvml = FakeNvml([FakeGpu()])
    [row] = agent_rows(nvml)
    failed, out = hardware_verdicts(nvml, [{**row, "health_reasons": ["nvml_slow"]}], capsys)
    assert failed == 1 and "FAIL  GPU 0: no NVML call took too long  (nvml_slow)" in out

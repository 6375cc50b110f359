"""``bench/gpu_check.py``'s verdicts, on the real H200 row it recorded and on rows altered from it."""

import json
from pathlib import Path

import pytest

from bench import gpu_check

[H200_ROW] = json.loads((Path(__file__).parent / "data" / "h200-snapshot.json").read_text())["devices"]["gpu"]
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

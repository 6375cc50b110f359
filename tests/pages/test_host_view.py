"""An agent snapshot taken apart for the instance page: a pure function. No database."""

import pytest

from proxy_app.pages.host_view import host_view
from tests.factories import make_gpu, make_snapshot


def full_snapshot():
    snapshot = make_snapshot(cpu=37.5, gpus=[make_gpu(i, power_limit_w=700.0, sm_clock_mhz=1980, mem_clock_mhz=2619,
                                                     ecc_uncorrected_volatile=0, throttle_reasons=[],
                                                     health_reasons=[]) for i in range(2)])
    snapshot["devices"]["cpu"].update(per_core_pct=[10.0, 90.0], count_logical=2, count_physical=1)
    snapshot["devices"]["memory"].update(swap_used_mb=512.0, swap_total_mb=2048.0)
    snapshot["devices"]["disk"] = [{"mount": "/", "used_gb": 50.0, "total_gb": 200.0}]
    snapshot["capacity_hint"]["admission_reasons"] = []
    return snapshot


def test_it_reads_every_part_of_a_snapshot():
    host = host_view(full_snapshot())
    assert host["has_snapshot"] and host["hostname"] == "gpu-host-1"
    assert host["cpu"]["util"] == 37.5 and host["cpu"]["cores"] == [10.0, 90.0]
    assert (host["cpu"]["count_logical"], host["cpu"]["count_physical"]) == (2, 1)
    assert host["memory"]["used_pct"] == 25.0 and host["memory"]["swap_pct"] == 25.0
    assert host["network"][0] == {"iface": "eth0", "rx_mbps": 1.0, "tx_mbps": 2.0, "speed_mbps": 10000.0,
                                  "rx_bytes_total": None, "tx_bytes_total": None}
    assert host["disks"] == [{"mount": "/", "used_gb": 50.0, "total_gb": 200.0, "used_pct": 25.0}]
    gpu = host["gpus"][1]
    assert gpu["index"] == 1 and gpu["util"] == 50.0 and gpu["power_pct"] == pytest.approx(100 / 7)
    assert (gpu["sm_clock_mhz"], gpu["ecc_uncorrected"], gpu["throttle_reasons"]) == (1980.0, 0, [])
    assert gpu["health"] == "ok" and not gpu["unhealthy"] and host["unhealthy_gpus"] == 0


def test_it_flags_an_unhealthy_gpu_with_its_reasons():
    snapshot = make_snapshot(gpus=[make_gpu(0), make_gpu(1, health="error", health_reasons=["ecc_uncorrected_volatile=3"],
                                                         ecc_uncorrected_volatile=3)])
    host = host_view(snapshot)
    assert host["unhealthy_gpus"] == 1
    assert host["gpus"][1]["unhealthy"] and host["gpus"][1]["health_reasons"] == ["ecc_uncorrected_volatile=3"]


def test_it_keeps_unknown_as_none_never_zero():
    snapshot = make_snapshot(cpu=None, used_mb=None, total_mb=None, free_mb=None,
                             gpus=[make_gpu(0, used=None, total=None, temperature_c="N/A", power_w=None)])
    host = host_view(snapshot)
    assert host["cpu"]["util"] is None and host["memory"]["used_pct"] is None
    gpu = host["gpus"][0]
    assert (gpu["memory_pct"], gpu["temperature_c"], gpu["power_pct"], gpu["throttle_reasons"]) == (None, None, None, None)


def test_it_takes_a_zero_total_as_no_percentage():
    host = host_view(make_snapshot(used_mb=0.0, total_mb=0.0, free_mb=0.0))
    assert host["memory"]["used_pct"] is None


def test_it_survives_snapshots_of_any_shape():
    for broken in ({}, None, [], {"devices": "x"}, {"devices": {"cpu": [], "gpu": {"a": 1}, "network": [1, "x"]}}):
        host = host_view(broken)
        assert host["gpus"] == [] and host["network"] == [] and host["cpu"]["cores"] == []
    assert host_view({})["has_snapshot"] is False

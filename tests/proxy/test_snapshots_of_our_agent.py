"""Our own agent's snapshots through the Proxy: the compat sample fields come out
as the original Proxy derives them (SPEC 2.2 → 3.1), end to end without a GPU.

The agent's real builder and GPU monitor run against the fake NVML; only the
clocks are injected, so every expected number is known. One snapshot was
recorded from the agent on a real NVIDIA H200 under load
(``bench/gpu_check.py``, 2026-11-30): it goes through the Proxy as it came,
and the fake NVML's GPU rows must have its exact shape.
"""

import json
from pathlib import Path

import pytest

from agent.gpu.monitor import HARDWARE_EVENT_FIELDS, GpuMonitor
from agent.sampler import HostSampler
from agent.snapshot import SnapshotBuilder
from tests.agent.conftest import FakeClock, FakeSource
from tests.agent.fake_pynvml import GIB, FakeGpu, FakeNvml

pytestmark = [pytest.mark.django_db, pytest.mark.both_entry_points]

WALL_AT_ZERO_MS = 1_767_225_600_000
H200_SNAPSHOT = Path(__file__).resolve().parent.parent / "agent" / "data" / "h200-snapshot.json"


@pytest.fixture
def agent_snapshots():
    """Snapshots of an agent with two GPUs, the second of which fails its utilisation read later."""
    clock = FakeClock(start_ms=0)
    boards = [FakeGpu(uuid="GPU-a", utilization=30, memory_used=10 * GIB),
              FakeGpu(uuid="GPU-b", utilization=70, memory_used=50 * GIB)]
    wall = lambda: WALL_AT_ZERO_MS + clock.ms()  # noqa: E731
    gpus = GpuMonitor(FakeNvml(boards), window_ms=5000, clock_ms=clock.ms, clock_wall_ms=wall)
    gpus.open()
    builder = SnapshotBuilder(HostSampler(FakeSource(), clock.ms), gpus, "agent-1", "gpu-host", clock_wall_ms=wall)
    return clock, boards, builder


def stored_resource(api, snapshot):
    response = api.post("/v1/instance/resource_snapshot", {"instance_id": "agent-1", "snapshot": snapshot})
    assert response.json() == {"ok": True}
    [row] = api.get("/v1/instance/list").json()
    return row["resource"]


def test_it_derives_the_sample_fields_from_our_agents_gpu_rows(api, frozen, register_instance, agent_snapshots):
    clock, boards, builder = agent_snapshots
    register_instance("agent-1")
    for _ in range(3):
        snapshot = builder.take()
        clock.advance(1000)
    resource = stored_resource(api, snapshot)

    assert resource["gpu_count"] == 2
    assert resource["gpu_sample_count"] == 6  # 3 samples on each GPU, summed
    assert resource["gpu_sample_age_ms"] == 0  # the newest sample is the snapshot's own
    assert resource["gpu_sample_source"] == "nvml"
    assert resource["gpu_sample_quality"] == "ok"
    assert resource["gpu_sample_window_ms"] == 5000
    assert resource["gpu_sample_count_min"] == 3
    assert resource["gpu_sample_coverage"] == "ok"
    assert resource["gpu_util_avg"] == 50.0


def test_it_ages_the_samples_when_utilisation_reads_fail(api, frozen, register_instance, agent_snapshots):
    clock, boards, builder = agent_snapshots
    register_instance("agent-1")
    builder.take()
    clock.advance(1500)
    for board in boards:
        board.failing["nvmlDeviceGetUtilizationRates"] = 999  # NVML_ERROR_UNKNOWN
    snapshot = builder.take()
    assert {gpu["utilization_error"] for gpu in snapshot["devices"]["gpu"]} == {"Unknown"}
    resource = stored_resource(api, snapshot)

    # Both rows are invalid now (their read failed), but their windows still
    # hold the sample from 1.5 s ago: the original's fields say exactly that.
    assert resource["gpu_count"] == 0
    assert resource["gpu_sample_age_ms"] == 1500
    assert resource["gpu_sample_count"] == 2
    assert resource["gpu_sample_quality"] == "error"  # the first row's own word
    assert resource["gpu_sample_coverage"] == "invalid"


def test_a_snapshot_from_a_real_h200_comes_out_as_its_gpu_rows_say(api, frozen, register_instance):
    snapshot = json.loads(H200_SNAPSHOT.read_text())
    [gpu] = snapshot["devices"]["gpu"]
    register_instance("agent-1")
    resource = stored_resource(api, snapshot)

    assert resource["gpu_count"] == 1
    assert resource["gpu_util_avg"] == gpu["utilization_pct_avg"] == 88.0
    assert resource["gpu_util_current"] == gpu["utilization_pct_current"] == 59.0
    assert resource["gpu_util_max"] == gpu["utilization_pct_max"] == 97.0
    assert resource["gpu_sample_count"] == gpu["utilization_sample_count"] == 5
    assert resource["gpu_sample_age_ms"] == snapshot["timestamp_ms"] - gpu["utilization_sample_timestamp_ms"]
    assert resource["gpu_sample_source"] == "nvml"
    assert resource["gpu_sample_quality"] == "ok"
    assert resource["gpu_sample_window_ms"] == 5000
    assert resource["gpu_mem_used_mb"] == 1497.9
    assert resource["gpu_mem_total_mb"] == 143771.0
    assert resource["gpu_sample_coverage"] == "ok"
    assert resource["admission_state"] == "accepting"


def test_the_fake_nvml_gives_rows_of_the_real_h200s_shape(agent_snapshots):
    clock, boards, builder = agent_snapshots
    builder.take()
    clock.advance(1000)
    [real] = json.loads(H200_SNAPSHOT.read_text())["devices"]["gpu"]
    for fake in builder.take()["devices"]["gpu"]:
        # The H200 row was recorded before SPEC 13 added the hardware-event fields (the next
        # bench/gpu_check.py run on a GPU host records them): the rest is the same, in the same order.
        older = {k: v for k, v in fake.items() if k not in HARDWARE_EVENT_FIELDS}
        assert list(older) == list(real)
        assert {k: type(v).__name__ for k, v in older.items()} == {k: type(v).__name__ for k, v in real.items()}
        assert list(fake)[list(fake).index("throttle_reasons") + 1:][:4] == list(HARDWARE_EVENT_FIELDS)

"""Our own agent's snapshots through the Proxy: the compat sample fields come out
as the original Proxy derives them (SPEC 2.2 → 3.1), end to end without a GPU.

The agent's real builder and GPU monitor run against the fake NVML; only the
clocks are injected, so every expected number is known.
"""

import pytest

from agent.gpu import GpuMonitor
from agent.sampler import HostSampler
from agent.snapshot import SnapshotBuilder
from tests.agent.conftest import FakeClock, FakeSource
from tests.agent.fake_pynvml import GIB, FakeGpu, FakeNvml

pytestmark = pytest.mark.django_db

WALL_AT_ZERO_MS = 1_767_225_600_000


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

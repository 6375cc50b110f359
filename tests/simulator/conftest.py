"""What the simulator is compared with: a snapshot of our real agent, engines included."""

import pytest

from agent.engines.scraper import EngineScrapers
from agent.gpu.monitor import GpuMonitor
from agent.sampler import HostSampler
from agent.snapshot import SnapshotBuilder
from tests.agent.conftest import ENGINE_CAPTURES, FakeClock, FakeEngine, FakeSource
from tests.agent.fake_pynvml import GIB, FakeGpu, FakeNvml
from tests.factories import T0_MS

BUSY = (ENGINE_CAPTURES / "vllm-0.32.0-cpu-busy.prom").read_text()
IDLE = (ENGINE_CAPTURES / "vllm-0.32.0-cpu-idle.prom").read_text()


@pytest.fixture
def agent_snapshot():
    """A snapshot of our real agent (fake NVML and counters) scraping a vLLM's real ``/metrics`` over HTTP.

    Taken after a first sample like every report, with the engine busy at the
    first scrapes and idle a second later, so the windowed figures have values.
    """
    clock = FakeClock(start_ms=0)
    wall = lambda: T0_MS + clock.ms()  # noqa: E731
    gpus = GpuMonitor(FakeNvml([FakeGpu(uuid="GPU-a", utilization=30, memory_used=10 * GIB)]), clock_ms=clock.ms,
                      clock_wall_ms=wall)
    gpus.open()
    engine = FakeEngine(BUSY)
    scrapers = EngineScrapers([engine.url], clock_ms=clock.ms, clock_wall_ms=wall)
    scrapers.start()
    try:
        builder = SnapshotBuilder(HostSampler(FakeSource(), clock.ms), gpus, "agent-1", "gpu-host",
                                  clock_wall_ms=wall, engines=scrapers)
        scrapers.prime()
        builder.take()
        for scraper in scrapers.scrapers:  # the scrape that take() asked for
            assert scraper.wait_idle(5.0)
        engine.body = IDLE
        clock.advance(1000)
        scrapers.prime()
        snapshot = builder.take()
    finally:
        scrapers.stop()
        engine.close()
    assert snapshot["engines"][0]["status"] == "ok" and snapshot["engines"][0]["ttft_p50_s"] is not None
    return snapshot

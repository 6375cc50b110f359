"""resource_snapshot_v1 assembled from host and GPU samples (SPEC 2.2)."""

import json
import threading

import pynvml

from agent import AGENT_VERSION
from agent.capacity import AdmissionThresholds
from agent.gpu.monitor import GpuMonitor
from agent.sampler import HostSampler
from agent.snapshot import SamplingLoop, SnapshotBuilder, SnapshotStore
from tests.agent.fake_pynvml import GIB, FakeNvml

TOP_LEVEL = {"schema_version", "agent_version", "instance_id", "timestamp_ms", "hostname", "devices", "runtime",
             "gpu_status", "capacity_hint"}


def make_builder(source, clock, nvml, **kwargs):
    gpus = GpuMonitor(nvml, clock_ms=clock.ms)
    gpus.open()
    return SnapshotBuilder(HostSampler(source, clock.ms), gpus, "gpu-host-1:8000", "gpu-host-1",
                           clock_wall_ms=lambda: 1_767_225_600_123, **kwargs)


def test_it_carries_every_spec_field(source, clock, two_gpus):
    snapshot = make_builder(source, clock, two_gpus).take()
    assert set(snapshot) == TOP_LEVEL
    assert snapshot["schema_version"] == "resource_snapshot_v1"
    assert snapshot["agent_version"] == AGENT_VERSION
    assert snapshot["instance_id"] == "gpu-host-1:8000"
    assert snapshot["timestamp_ms"] == 1_767_225_600_123
    assert snapshot["hostname"] == "gpu-host-1"
    assert snapshot["runtime"] == {}
    assert snapshot["gpu_status"] == "ok"
    devices = snapshot["devices"]
    assert set(devices) == {"cpu", "memory", "network", "disk", "gpu"}
    assert set(devices["cpu"]) == {"utilization_pct", "load1", "load5", "load15", "per_core_pct", "count_logical",
                                   "count_physical"}
    assert set(devices["memory"]) == {"used_mb", "total_mb", "free_mb", "swap_used_mb", "swap_total_mb"}
    assert set(devices["network"][0]) == {"iface", "rx_mbps", "tx_mbps", "speed_mbps", "rx_bytes_total",
                                          "tx_bytes_total"}
    assert devices["disk"] == [{"mount": "/", "used_gb": 125.0, "total_gb": 500.0}]
    assert [gpu["index"] for gpu in devices["gpu"]] == [0, 1]
    assert set(snapshot["capacity_hint"]) == {"memory_free_ratio", "admission_state", "admission_reasons"}
    json.dumps(snapshot, allow_nan=False)  # plain JSON: no NaN, no objects


def test_it_gives_null_rates_in_the_first_snapshot_then_real_ones(source, clock, two_gpus):
    builder = make_builder(source, clock, two_gpus)
    first = builder.take()
    assert first["devices"]["cpu"]["utilization_pct"] is None
    assert first["devices"]["network"][0]["rx_mbps"] is None
    source.add_cpu(busy=0.5, idle=0.5)
    clock.advance(1000)
    second = builder.take()
    assert second["devices"]["cpu"]["utilization_pct"] == 50.0
    assert second["devices"]["network"][0]["rx_mbps"] == 0.0


def test_it_builds_the_capacity_hint_by_the_admission_rule(source, clock, two_gpus):
    # GPU 1 holds 70 of 80 GiB (0.875): fine by default, too much for a 0.8 limit.
    strict = make_builder(source, clock, two_gpus, thresholds=AdmissionThresholds(max_gpu_memory_ratio=0.8))
    hint = strict.take()["capacity_hint"]
    assert hint == {"memory_free_ratio": 0.75, "admission_state": "degraded",
                    "admission_reasons": ["gpu1:memory_used_ratio=0.875>0.8"]}


def test_it_reports_an_empty_gpu_list_and_why_without_nvml(source, clock):
    nvml = FakeNvml(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    snapshot = make_builder(source, clock, nvml).take()
    assert snapshot["devices"]["gpu"] == []
    assert snapshot["gpu_status"] == "nvml_unavailable: NVML Shared Library Not Found"
    assert snapshot["capacity_hint"]["admission_state"] == "accepting"


def test_it_rejects_work_when_a_gpu_is_lost(source, clock, two_gpus):
    builder = make_builder(source, clock, two_gpus)
    two_gpus.gpus[0].lost = True
    hint = builder.take()["capacity_hint"]
    assert hint["admission_state"] == "rejecting" and "gpu0:health=error" in hint["admission_reasons"]


def test_it_rejects_work_on_low_host_memory(source, clock, two_gpus):
    source.memory = source.memory._replace(available=GIB // 2)
    hint = make_builder(source, clock, two_gpus).take()["capacity_hint"]
    assert hint["memory_free_ratio"] == 0.0312 and hint["admission_state"] == "rejecting"


def test_it_keeps_the_latest_snapshot_and_its_json():
    store = SnapshotStore()
    assert store.latest() is None and store.latest_body() is None
    store.put({"timestamp_ms": 1})
    store.put({"timestamp_ms": 2})
    assert store.latest() == {"timestamp_ms": 2}
    assert json.loads(store.latest_body()) == {"timestamp_ms": 2}



def test_it_encodes_each_snapshot_once_when_first_read_not_at_each_put():
    store = SnapshotStore()
    store.put({"timestamp_ms": 1})
    body = store.latest_body()
    assert body == b'{"timestamp_ms":1}' and store.latest_pair()[1] is body  # readers share one encoding
    store.put({"timestamp_ms": 2})
    store.put({"timestamp_ms": 3})
    assert store.latest_pair() == ({"timestamp_ms": 3}, b'{"timestamp_ms":3}')


class FlakyBuilder:
    def __init__(self):
        self.calls = 0

    def take(self):
        self.calls += 1
        if self.calls == 2:
            raise OSError("/proc vanished")
        return {"n": self.calls}


def test_it_keeps_the_previous_snapshot_and_the_loop_alive_after_a_failed_sample(clock, caplog):
    store = SnapshotStore()
    loop = SamplingLoop(FlakyBuilder(), store, 1000, clock.ms)
    assert loop.sample_once() is True
    assert loop.sample_once() is False
    assert store.latest() == {"n": 1}
    assert "sampling failed" in caplog.text
    assert loop.sample_once() is True
    assert store.latest() == {"n": 3}


class SignallingBuilder:
    """Counts its samples and says when the n-th was taken."""

    def __init__(self, builder, wanted):
        self.builder = builder
        self.taken = 0
        self.wanted = wanted
        self.done = threading.Event()

    def take(self):
        snapshot = self.builder.take()
        self.taken += 1
        if self.taken >= self.wanted:
            self.done.set()
        return snapshot


def test_it_samples_on_its_thread_until_stopped(source, clock, two_gpus):
    store = SnapshotStore()
    builder = SignallingBuilder(make_builder(source, clock, two_gpus), wanted=3)
    loop = SamplingLoop(builder, store, 10)
    loop.start()
    assert builder.done.wait(30), "the loop took fewer than 3 samples in 30 s"
    loop.stop()
    assert not loop._thread.is_alive()
    assert store.latest() is not None

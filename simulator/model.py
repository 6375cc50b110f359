"""Synthetic GPU hosts: what each one reports, round after round (pure, no network, no clock).

A ``SimulatedHost`` is one instance's host. Every random choice comes from
the host's own stream, seeded from the run's seed and the host's index, so a
host reports the same figures whichever process simulates it and whatever
else runs beside it. Callers pass the wall time in (epoch milliseconds).

Each report slot the driver asks ``next_round()`` what the host does:

- ``REPORT``: send a snapshot. Figures drift smoothly: a per-host load level
  follows a mean-reverting random walk and drives GPU utilisation,
  temperature, power, CPU, host memory and network.
- ``SILENT``: a stale spell. The host stops reporting and heartbeating for
  a while (unreachable, hung), then comes back on its own.
- ``RESTART``: the agent crashed and started again: it registers anew and
  its ``report_seq`` starts over at 1, with a newer wall time, which is how
  the Proxy tells a restart from a late report (SPEC 3.1).

GPUs fall ill and recover as a two-state chain per GPU (long-run share of
unhealthy GPUs: ``FleetProfile.unhealthy_gpu_share``). The health verdict and
the admission state are the agent's own functions (``agent.gpu.health``,
``agent.capacity.capacity_hint``), as on a real host (SPEC 2.2).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from random import Random

from agent import AGENT_VERSION
from agent.capabilities import fingerprint, parse_capabilities
from agent.capacity import AdmissionThresholds, capacity_hint
from agent.snapshot import SCHEMA_VERSION
from simulator.engines import host_engine
from simulator.gpus import A10G, A100, H100, L4, GpuKind, SimulatedGpu, clamp, mean

SIMULATED_AGENT_VERSION = f"{AGENT_VERSION}+sim"
ENDPOINTS = ["chat/completions", "completions"]
# The agent's default GPU utilisation window, and a cap on samples kept per GPU.
GPU_WINDOW_MS = 5000
MAX_WINDOW_SAMPLES = 10
THRESHOLDS = AdmissionThresholds()


@dataclass(frozen=True)
class HostShape:
    """A kind of serving host: its GPUs, cores, memory and network."""

    name: str
    gpu_count: int
    gpu: GpuKind
    cores: int
    memory_total_mb: float
    nic_speed_mbps: int
    fabric_speed_mbps: int | None  # a second, RDMA interface on the large hosts
    model: str  # what its instance serves, when it has capabilities


SHAPES = {
    0: HostShape("cpu", 0, L4, 32, 128512.0, 25000, None, "Qwen/Qwen2.5-0.5B-Instruct"),
    1: HostShape("l4x1", 1, L4, 16, 64216.0, 25000, None, "Qwen/Qwen2.5-7B-Instruct"),
    2: HostShape("a10gx2", 2, A10G, 48, 192889.0, 25000, None, "meta-llama/Llama-3.1-8B-Instruct"),
    4: HostShape("a100x4", 4, A100, 64, 1031603.0, 100000, 200000, "Qwen/Qwen2.5-72B-Instruct"),
    8: HostShape("h100x8", 8, H100, 96, 2063720.0, 100000, 400000, "meta-llama/Llama-3.1-70B-Instruct"),
}


def shape_for(gpu_count):
    """The host shape with ``gpu_count`` GPUs; sizes without a named shape are H100 hosts."""
    if gpu_count in SHAPES:
        return SHAPES[gpu_count]
    return HostShape(f"h100x{gpu_count}", gpu_count, H100, max(16, 12 * gpu_count), 257965.0 * gpu_count,
                     100000, 400000 if gpu_count > 2 else None, "meta-llama/Llama-3.1-70B-Instruct")


@dataclass(frozen=True)
class FleetProfile:
    """What the fleet is made of and how often things go wrong.

    Rates are per host-hour of simulated time; shares are long-run fractions.
    """

    gpu_counts: tuple = (1, 2, 4, 8)  # host sizes, picked evenly
    gpu_counts_in_turn: bool = False  # host i gets gpu_counts[i % len] instead of a seeded pick
    unhealthy_gpu_share: float = 0.03  # of GPUs, at any moment
    gpu_fault_mean_s: float = 180.0  # how long a GPU fault lasts on average
    stale_per_hour: float = 1.0  # stale spells started per host-hour
    stale_spell_s: tuple = (15.0, 90.0)  # a spell's length, uniform in this range
    restarts_per_hour: float = 0.5  # agent restarts per host-hour
    capabilities_share: float = 0.5  # of instances registering typed capabilities
    engines: bool = True  # GPU hosts run a vLLM server the agent scrapes (SPEC 13)
    engine_fault_share: float = 0.02  # of engines failing to answer at any moment
    engine_fault_mean_s: float = 60.0  # how long an engine fault lasts on average
    engine_bursts_per_hour: float = 4.0  # request bursts per engine-hour

    @classmethod
    def calm(cls, **overrides):
        """No stale spells and no restarts: every slot reports (exact counts for tests and benches)."""
        return cls(**{"stale_per_hour": 0.0, "restarts_per_hour": 0.0, **overrides})


def per_round(rate_per_hour, interval_ms):
    """The chance per report slot of an event that happens ``rate_per_hour`` times an hour."""
    return min(1.0, rate_per_hour * interval_ms / 3_600_000)


class Round(enum.Enum):
    REPORT = "report"
    SILENT = "silent"
    RESTART = "restart"


def capabilities_for(shape: HostShape, rng: Random):
    """A typed ``InstanceCapability`` object (SPEC 3.2) for a vLLM instance on this host."""
    adapters = []
    if rng.random() < 0.3:
        adapters.append({"identifier": "sql-lora", "revision": "v2", "configuration": {"r": 16, "alpha": 32},
                         "configuration_hash": None})
    return {
        "schema_version": "1",
        "model": {"identifier": shape.model, "revision": "main"},
        "tokenizer": {"identifier": shape.model, "revision": None},
        "adapters": adapters,
        "kv_cache": {"layout": "paged", "schema_version": "1", "dtype": rng.choice(["bfloat16", "fp8"]),
                     "block_size": 16, "layout_parameters": {}},
        "parallelism": {"tensor_parallel_size": shape.gpu_count or None, "pipeline_parallel_size": 1,
                        "data_parallel_size": None},
        "runtime": {"vllm_version": rng.choice(["0.8.5", "0.9.1"]),
                    "lmcache_version": rng.choice(["0.2.1", None]),
                    "supported_cache_features": ["prefix_caching", "chunked_prefill"]},
    }


class SimulatedHost:
    """One instance's host: its identity, its drifting figures, its churn."""

    def __init__(self, index, seed=0, profile: FleetProfile = FleetProfile(), interval_ms=1000, id_prefix="sim",
                 id_width=5):
        rng = self.rng = Random(f"fleetwatch-simulator:{seed}:{index}")
        self.index = index
        self.profile = profile
        self.interval_ms = interval_ms
        self.instance_id = f"{id_prefix}-{index:0{id_width}d}"
        drawn = rng.choice(profile.gpu_counts)  # drawn either way: the host's stream stays as it was
        counts = profile.gpu_counts
        self.shape = shape = shape_for(counts[index % len(counts)] if profile.gpu_counts_in_turn else drawn)
        self.hostname = f"{shape.name}-{index:05d}.sim.internal"
        self.address = f"10.{64 + index // 65536 % 64}.{index // 256 % 256}.{index % 256}"
        self.port = 8000

        # The host's character: how busy, how hungry, how its vLLM sized its KV cache.
        heavy_memory = rng.random() < 0.03
        self.cpu_hot = rng.random() < 0.03
        self.load_mean = rng.uniform(0.75, 0.95) if heavy_memory else rng.uniform(0.15, 0.85)
        self.load = self.load_mean
        self.memory_base = 0.84 if heavy_memory else rng.uniform(0.15, 0.55)
        self.kv_fraction = rng.choices((0.85, 0.9, 0.92, 0.95, 0.98), (2, 5, 2, 2, 0.5))[0]
        self.core_bias_tenths = [rng.randint(-120, 120) for _ in range(shape.cores)]
        self.swap_total_mb = rng.choice((0.0, 0.0, 8192.0))
        self.root_used_gb = rng.uniform(40.0, 300.0)
        self.capabilities = capabilities_for(shape, rng) if rng.random() < profile.capabilities_share else None
        self.engine = host_engine(seed, index, shape, profile, self.capabilities)  # before the fingerprint
        self.capability_fingerprint = fingerprint(parse_capabilities(self.capabilities))
        self.models_used_gb = rng.uniform(300.0, 1600.0) if self.capabilities else None
        self.uptime_ms = rng.randint(3_600_000, 60 * 86_400_000)
        self.rx_bytes = [rng.randint(10**9, 10**13) for _ in self._interfaces()]
        self.tx_bytes = [rng.randint(10**9, 10**13) for _ in self._interfaces()]
        samples = clamp(round(GPU_WINDOW_MS / interval_ms), 1, MAX_WINDOW_SAMPLES)
        self.window_ms = samples * interval_ms
        self.gpus = [SimulatedGpu(i, shape.gpu, rng, samples, self.kv_fraction) for i in range(shape.gpu_count)]
        for gpu in self.gpus:  # start in the long-run state, not all healthy
            if rng.random() < profile.unhealthy_gpu_share:
                gpu.step_fault(rng, 1.0, 0.0)

        self._recover = min(1.0, interval_ms / (profile.gpu_fault_mean_s * 1000.0))
        share = profile.unhealthy_gpu_share
        self._fall_ill = min(1.0, self._recover * share / (1.0 - share)) if share < 1.0 else 1.0
        self._p_restart = per_round(profile.restarts_per_hour, interval_ms)
        self._p_stale = per_round(profile.stale_per_hour, interval_ms)
        self._first_wall_ms = None
        self._load5 = self._load15 = None
        self.report_seq = 0
        self.silent_rounds = 0
        self.fresh = True  # the next sample is the agent's first: rates are unknown (null)
        self.sample_lag_ms = self._draw_sample_lag()
        # What happened, for tests and the summary.
        self.stale_spells = 0
        self.restarts = 0
        self.gpu_faults = 0

    def _interfaces(self):
        shape = self.shape
        fabric = [("ib0", shape.fabric_speed_mbps)] if shape.fabric_speed_mbps else []
        return [("eth0", shape.nic_speed_mbps), *fabric]

    def _draw_sample_lag(self):
        # The agent samples and reports on separate 1 s timers: the snapshot a
        # report carries is a fixed time old, until the agent restarts.
        return self.rng.randrange(0, min(self.interval_ms, 1000))

    @property
    def silent(self):
        return self.silent_rounds > 0

    # --- churn ----------------------------------------------------------------

    def next_round(self) -> Round:
        """What the host does in its next report slot."""
        if self.silent_rounds > 0:
            self.silent_rounds -= 1
            return Round.SILENT if self.silent_rounds > 0 else Round.REPORT
        draw = self.rng.random()
        if draw < self._p_restart:
            self.restart()
            return Round.RESTART
        if draw < self._p_restart + self._p_stale:
            low, high = self.profile.stale_spell_s
            self.silent_rounds = max(1, round(self.rng.uniform(low, high) * 1000.0 / self.interval_ms))
            self.stale_spells += 1
            return Round.SILENT
        return Round.REPORT

    def restart(self):
        """The agent process starts again: sequence from 1, empty windows, no rates yet."""
        self.report_seq = 0
        self.fresh = True
        self.sample_lag_ms = self._draw_sample_lag()
        for gpu in self.gpus:
            gpu.restart()
        if self.engine is not None:
            self.engine.agent_restarted()
        self.restarts += 1

    # --- bodies ---------------------------------------------------------------

    def register_body(self):
        body = {
            "instance_id": self.instance_id,
            "host": self.address,
            "port": self.port,
            "endpoints": ENDPOINTS,
            "tags": [self.shape.name, "simulated"],
            "weight": float(self.shape.gpu_count),
            "meta": {"agent_version": SIMULATED_AGENT_VERSION, "hostname": self.hostname,
                     "gpu_names": [gpu.kind.name for gpu in self.gpus], "simulated": True},
        }
        if self.capabilities is not None:
            body["capabilities"] = self.capabilities
        return body

    def heartbeat_body(self, with_capabilities=False):
        """A heartbeat with load figures; the fingerprint alone, or the full capabilities when asked for."""
        # No draws from the host's stream here: heartbeats come on their own
        # timer, and the snapshots must not depend on how they interleave.
        gpus = self.shape.gpu_count
        body = {
            "instance_id": self.instance_id,
            "inflight": int(round(self.load * 24 * gpus)),
            "qps_1m": round(self.load * 3.0 * gpus, 2),
        }
        currents = [gpu.window[-1] for gpu in self.gpus if gpu.window and gpu.window[-1] is not None]
        if currents:
            body["gpu_util"] = round(mean(currents), 1)
        if self.capabilities is not None:
            if with_capabilities:
                body["capabilities"] = self.capabilities
            else:
                body["capability_fingerprint"] = self.capability_fingerprint
        return body

    def unregister_body(self):
        return {"instance_id": self.instance_id}

    def report_body(self, wall_ms):
        """The next ``/v1/instance/resource_snapshot`` body: a fresh snapshot and its metadata."""
        snapshot = self.snapshot(wall_ms)
        if self._first_wall_ms is None:
            self._first_wall_ms = wall_ms
        self.report_seq += 1
        return {
            "instance_id": self.instance_id,
            "snapshot": snapshot,
            "metadata": {
                "reported_instance_id": self.instance_id,
                "report_monotonic_ms": self.uptime_ms + wall_ms - self._first_wall_ms,
                "report_wall_time_ms": wall_ms,
                "agent_snapshot_timestamp_ms": snapshot["timestamp_ms"],
                "report_seq": self.report_seq,
            },
        }

    def snapshot(self, wall_ms):
        """Advance the host's figures by one sample and return ``resource_snapshot_v1``."""
        rng = self.rng
        self.load = clamp(self.load + 0.05 * (self.load_mean - self.load) + rng.gauss(0.0, 0.025), 0.01, 1.0)
        for gpu in self.gpus:
            if gpu.step_fault(rng, self._fall_ill, self._recover):
                self.gpu_faults += 1
        timestamp_ms = wall_ms - self.sample_lag_ms
        engines, gpu_load = None, self.load
        if self.engine is not None:  # its own random stream: the host's draws stay as they were
            self.engine.advance(timestamp_ms, self.load)
            engines = self.engine.objects(timestamp_ms)
            gpu_load = max(gpu_load, self.engine.busy)  # a full batch keeps its GPUs busy
        gpus = [gpu.row(rng, gpu_load, self.window_ms, self.interval_ms, timestamp_ms) for gpu in self.gpus]
        cpu = self._cpu()
        memory = self._memory()
        devices = {"cpu": cpu, "memory": memory, "network": self._network(), "disk": self._disk(), "gpu": gpus}
        self.fresh = False
        snapshot = {
            "schema_version": SCHEMA_VERSION,
            "agent_version": SIMULATED_AGENT_VERSION,
            "instance_id": self.instance_id,
            "timestamp_ms": timestamp_ms,
            "hostname": self.hostname,
            "devices": devices,
            "runtime": {},
            "gpu_status": "ok" if gpus else "no_gpu",
            "capacity_hint": capacity_hint(memory, cpu, gpus, THRESHOLDS, engines),
        }
        if engines is not None:
            snapshot["engines"] = engines
        return snapshot

    def _cpu(self):
        shape, load = self.shape, self.load
        base = 55.0 + 45.0 * load if self.cpu_hot else 5.0 + 35.0 * load
        total = round(clamp(base + 4.0 * (self.rng.random() - 0.5), 0.0, 100.0), 1)
        load1 = round(total / 100.0 * shape.cores * (0.9 + 0.2 * self.rng.random()), 2)
        if self._load5 is None:
            self._load5 = self._load15 = load1
        self._load5 += (load1 - self._load5) * (1.0 - math.exp(-self.interval_ms / 300_000))
        self._load15 += (load1 - self._load15) * (1.0 - math.exp(-self.interval_ms / 900_000))
        if self.fresh:
            utilization, per_core = None, None  # a rate needs two samples (SPEC 2.2)
        else:
            utilization = total
            per_core = self._per_core(int(round(total * 10)))
        return {
            "utilization_pct": utilization,
            "load1": load1,
            "load5": round(self._load5, 2),
            "load15": round(self._load15, 2),
            "per_core_pct": per_core,
            "count_logical": shape.cores,
            "count_physical": shape.cores // 2,
        }

    def _per_core(self, total_tenths):
        # In integer tenths: n / 10 is the double nearest the 1-decimal figure,
        # so it encodes short, and the common case needs no clamping.
        bias = self.core_bias_tenths
        if 0 <= total_tenths - 120 and total_tenths + 120 <= 1000:
            return [(total_tenths + b) / 10 for b in bias]
        return [min(1000, max(0, total_tenths + b)) / 10 for b in bias]

    def _memory(self):
        total = self.shape.memory_total_mb
        used = round(total * clamp(self.memory_base + 0.12 * self.load, 0.0, 0.995), 1)
        swap_used = round(self.swap_total_mb * 0.02, 1)
        return {"used_mb": used, "total_mb": total, "free_mb": round(total - used, 1),
                "swap_used_mb": swap_used, "swap_total_mb": self.swap_total_mb}

    def _network(self):
        rng, load, seconds = self.rng, self.load, self.interval_ms / 1000.0
        entries = []
        for i, (iface, speed) in enumerate(self._interfaces()):
            share = 0.004 + 0.02 * load if i == 0 else 0.3 * load
            rx = round(speed * share * (0.85 + 0.3 * rng.random()), 1)
            tx = round(rx * (0.55 if i == 0 else 0.95), 1)
            self.rx_bytes[i] += int(rx * 125_000 * seconds)
            self.tx_bytes[i] += int(tx * 125_000 * seconds)
            entries.append({
                "iface": iface,
                "rx_mbps": None if self.fresh else rx,
                "tx_mbps": None if self.fresh else tx,
                "speed_mbps": speed,
                "rx_bytes_total": self.rx_bytes[i],
                "tx_bytes_total": self.tx_bytes[i],
            })
        return entries

    def _disk(self):
        disks = [{"mount": "/", "used_gb": round(self.root_used_gb, 2), "total_gb": 1787.6}]
        if self.models_used_gb is not None:
            disks.append({"mount": "/models", "used_gb": round(self.models_used_gb, 2), "total_gb": 3575.4})
        return disks

    # --- what an operator would see -----------------------------------------------

    def unhealthy_gpus(self):
        return sum(1 for gpu in self.gpus if gpu.fault is not None)


def build_fleet(indices, instances, seed=0, profile=FleetProfile(), interval_ms=1000, id_prefix="sim"):
    """The hosts with the given indices out of a fleet of ``instances``."""
    width = max(5, len(str(instances - 1)))
    return [SimulatedHost(i, seed, profile, interval_ms, id_prefix, width) for i in indices]

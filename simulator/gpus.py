"""Synthetic GPUs: one board's utilisation window, temperature, memory, power and faults
(pure, no network, no clock), as ``agent.gpu.monitor`` reports a real one.

A fault is a two-state chain per GPU (healthy, ill with one of ``GpuFault``,
among them SPEC 13's hardware events: a critical XID, a row-remap failure,
an NVML call that hangs);
the host (``model.SimulatedHost``) draws the chances and passes its own
random stream, so a GPU's figures are as reproducible as its host's.
"""

from __future__ import annotations

import enum
import uuid
from collections import deque
from dataclasses import dataclass
from random import Random

from agent.gpu.health import NVML_SLOW
from agent.gpu.monitor import HEALTH_OK, READING_FIELDS, gpu_health


@dataclass(frozen=True)
class GpuKind:
    name: str
    memory_total_mb: float
    power_limit_w: float
    idle_power_w: float
    max_sm_clock_mhz: int
    mem_clock_mhz: int


L4 = GpuKind("NVIDIA L4", 23034.0, 72.0, 16.0, 2040, 6251)
A10G = GpuKind("NVIDIA A10G", 23028.0, 300.0, 25.0, 1710, 6251)
A100 = GpuKind("NVIDIA A100-SXM4-80GB", 81920.0, 400.0, 60.0, 1410, 1593)
H100 = GpuKind("NVIDIA H100 80GB HBM3", 81559.0, 700.0, 70.0, 1980, 2619)


class GpuFault(enum.Enum):
    THERMAL = "thermal"  # degraded: hot, clocks held down
    HW_SLOWDOWN = "hw_slowdown"  # degraded: hardware slowdown
    UTILIZATION_READ_FAILED = "utilization_read_failed"  # degraded, sample not ok
    ECC_UNCORRECTED = "ecc_uncorrected"  # error: drain and reset
    LOST = "gpu_lost"  # error: fell off the bus, nothing readable
    XID = "xid"  # error: a critical XID event (SPEC 13), for as long as the agent counts it recent
    ROW_REMAP_FAILURE = "row_remap_failure"  # error: a memory row could not be remapped
    NVML_SLOW = "nvml_slow"  # degraded: an NVML call hangs, nothing known meanwhile


GPU_FAULTS = tuple(GpuFault)
GPU_FAULT_WEIGHTS = (3.0, 2.0, 2.0, 1.5, 1.5, 1.0, 0.5, 1.0)
# Critical XIDs a serving GPU raises: double-bit ECC, row-remap events, contained and uncontained ECC, GSP errors.
XID_CODES = (48, 63, 64, 94, 95, 119)


def clamp(value, low, high):
    return low if value < low else high if value > high else value


def mean(values):
    return sum(values) / len(values)


class SimulatedGpu:
    """One board of a host: utilisation window, temperature, memory and fault state."""

    def __init__(self, index, kind: GpuKind, rng: Random, window_samples: int, kv_fraction: float):
        self.index = index
        self.kind = kind
        self.uuid = f"GPU-{uuid.UUID(int=rng.getrandbits(128))}"
        self.bias = rng.uniform(0.85, 1.12)
        self.temperature_offset = rng.uniform(-3.0, 4.0)
        # vLLM takes its share of GPU memory for the KV cache at start and keeps it.
        self.memory_used_mb = min(round(kind.memory_total_mb * kv_fraction + rng.uniform(-150.0, 150.0), 1),
                                  kind.memory_total_mb)
        self.memory_free_mb = round(kind.memory_total_mb - self.memory_used_mb, 1)
        self.temperature = 35.0 + self.temperature_offset
        self.window = deque(maxlen=window_samples)  # utilisation readings, None where a read failed
        self.rounds_since_sample = None
        self.fault = None
        self.ecc_errors = 0
        self.xid_last, self.xid_count = None, 0  # what the agent's event listener saw since it started

    def restart(self):
        """A new agent process starts with an empty window and has seen no XID yet."""
        self.window.clear()
        self.rounds_since_sample = None
        self.xid_last, self.xid_count = None, 0

    def step_fault(self, rng: Random, fall_ill, recover):
        """Advance the fault chain by one sample; returns True when a fault started now."""
        if self.fault is not None:
            if rng.random() < recover:
                # Reset and cooled down: the volatile ECC count clears, the heat is gone.
                self.fault, self.ecc_errors = None, 0
                self.temperature = min(self.temperature, 80.0)
            return False
        if rng.random() < fall_ill:
            self.fault = rng.choices(GPU_FAULTS, GPU_FAULT_WEIGHTS)[0]
            self.ecc_errors = rng.randint(1, 4) if self.fault is GpuFault.ECC_UNCORRECTED else 0
            if self.fault is GpuFault.XID:
                self.xid_last = rng.choice(XID_CODES)
                self.xid_count += 1
            if self.fault in (GpuFault.LOST, GpuFault.NVML_SLOW):
                self.window.clear()  # samples from before describe a device whose state is unknown now
                self.rounds_since_sample = None
            return True
        return False

    def row(self, rng: Random, load, window_ms, interval_ms, snapshot_ms):
        """This GPU's ``devices.gpu`` entry, field for field as ``agent.gpu.monitor`` writes it."""
        # This runs for every GPU of every report: uniform noise from
        # random() (a tenth of gauss()'s cost) and builtins over the window.
        kind, fault = self.kind, self.fault
        if fault is GpuFault.LOST or fault is GpuFault.NVML_SLOW:
            return self._unreadable_row(window_ms)
        utilization = min(100.0, max(0.0, 100.0 * load * self.bias + 8.0 * (rng.random() - 0.5)))
        if fault is GpuFault.HW_SLOWDOWN:
            utilization *= 0.6
        reading = None if fault is GpuFault.UTILIZATION_READ_FAILED else int(utilization + 0.5)
        window = self.window
        window.append(reading)
        if None in window:
            samples = [value for value in window if value is not None]
        else:
            samples = window
        if reading is not None:
            self.rounds_since_sample = 0
        elif self.rounds_since_sample is not None:
            self.rounds_since_sample += 1
        if samples:
            count = len(samples)
            average, peak = round(sum(samples) / count, 1), float(max(samples))
        else:
            count, average, peak, self.rounds_since_sample = 0, None, None, None
        age = None if self.rounds_since_sample is None else self.rounds_since_sample * interval_ms

        self.temperature += 0.25 * (30.0 + 0.5 * utilization + self.temperature_offset - self.temperature)
        if fault is GpuFault.THERMAL:
            self.temperature = max(self.temperature, 86.0 + 6.0 * rng.random())
        temperature = int(self.temperature + 0.5)
        limit = kind.power_limit_w
        power = min(round(kind.idle_power_w + (limit - kind.idle_power_w) * utilization * (
            0.009 + 0.001 * rng.random()), 1), limit)
        clock_jitter = int(30 * rng.random())  # drawn either way: the draws never depend on the load
        if utilization < 3.0:
            throttle, sm_clock = ["gpu_idle"], 210
        else:
            throttle = ["sw_power_cap"] if power >= 0.97 * limit else []
            sm_clock = kind.max_sm_clock_mhz - clock_jitter
        remap_failure = fault is GpuFault.ROW_REMAP_FAILURE
        if fault is None:
            health, reasons = HEALTH_OK, []  # nothing a healthy board reports trips gpu_health
        else:
            if fault is GpuFault.THERMAL:
                throttle, sm_clock = throttle + ["sw_thermal_slowdown"], int(sm_clock * 0.7)
            elif fault is GpuFault.HW_SLOWDOWN:
                throttle, sm_clock = throttle + ["hw_slowdown"], int(sm_clock * 0.5)
            failed_reads = [("utilization", "Unknown")] if reading is None else []
            # An agent that started after the event never heard of it.
            xid_codes = [self.xid_last] if fault is GpuFault.XID and self.xid_last is not None else []
            health, reasons = gpu_health(None, failed_reads, temperature, self.ecc_errors, throttle,
                                         xid_codes=xid_codes, remap_failure=remap_failure)
        ok = reading is not None
        return {
            "index": self.index,
            "uuid": self.uuid,
            "name": kind.name,
            "utilization_pct": average,
            "utilization_pct_current": float(reading) if ok else None,
            "utilization_pct_avg": average,
            "utilization_pct_max": peak,
            "utilization_sample_count": count,
            "utilization_window_ms": window_ms,
            "utilization_sample_ok": ok,
            "utilization_sample_quality": "ok" if ok else "error",
            "utilization_sample_timestamp_ms": None if age is None else snapshot_ms - age,
            "utilization_sample_age_ms": age,
            "utilization_raw_value": str(reading) if ok else None,
            "utilization_error": None if ok else "Unknown",
            "utilization_source": "nvml",
            "memory_used_mb": self.memory_used_mb,
            "memory_total_mb": kind.memory_total_mb,
            "memory_free_mb": self.memory_free_mb,
            "temperature_c": temperature,
            "power_w": power,
            "power_limit_w": limit,
            "sm_clock_mhz": sm_clock,
            "mem_clock_mhz": kind.mem_clock_mhz,
            "ecc_uncorrected_volatile": self.ecc_errors,
            "throttle_reasons": throttle,
            "remapped_rows_pending": remap_failure,  # a failed remap leaves its row pending
            "remapped_rows_failure": remap_failure,
            "xid_last": self.xid_last,
            "xid_count": self.xid_count,
            "health": health,
            "health_reasons": reasons,
        }

    def _unreadable_row(self, window_ms):
        """A board NVML cannot read: fallen off the bus (error), or a call that hangs (degraded)."""
        if self.fault is GpuFault.LOST:
            error, (health, reasons) = GpuFault.LOST.value, gpu_health(GpuFault.LOST.value)
        else:
            error, (health, reasons) = NVML_SLOW, gpu_health(nvml_slow=True)
        return {
            "index": self.index, "uuid": self.uuid, "name": self.kind.name,
            "utilization_pct": None, "utilization_pct_current": None, "utilization_pct_avg": None,
            "utilization_pct_max": None, "utilization_sample_count": 0, "utilization_window_ms": window_ms,
            "utilization_sample_ok": False, "utilization_sample_quality": "error",
            "utilization_sample_timestamp_ms": None, "utilization_sample_age_ms": None,
            "utilization_raw_value": None, "utilization_error": error, "utilization_source": "nvml",
            **dict.fromkeys(READING_FIELDS), "xid_last": self.xid_last, "xid_count": self.xid_count,
            "health": health, "health_reasons": reasons,
        }

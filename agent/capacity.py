"""The admission rule of SPEC 2.2: may this instance take more work?

A pure function of one snapshot's measurements. Unknown values (null) never
trigger a verdict on their own: a first sample without a CPU rate is judged
on what is known, not on a made-up zero.
"""

from __future__ import annotations

from dataclasses import dataclass

ACCEPTING = "accepting"
DEGRADED = "degraded"
REJECTING = "rejecting"


@dataclass(frozen=True)
class AdmissionThresholds:
    min_memory_free_ratio: float = 0.05  # below: rejecting
    max_cpu_pct: float = 95.0  # above: degraded
    max_gpu_memory_ratio: float = 0.97  # any GPU above: degraded


def memory_free_ratio(free_mb, total_mb):
    """Available / total host memory, 4 decimals; None when either is unknown."""
    if free_mb is None or not total_mb:
        return None
    return round(free_mb / total_mb, 4)


def admission(free_ratio, cpu_pct, gpus, thresholds: AdmissionThresholds):
    """``(state, reasons)`` for host measurements and the snapshot's GPU entries.

    Reasons are short ``name=value`` strings, one per rule that fired, so an
    operator sees every cause, not just the one that decided the state.
    """
    rejecting, degraded = [], []
    if free_ratio is not None and free_ratio < thresholds.min_memory_free_ratio:
        rejecting.append(f"memory_free_ratio={free_ratio}<{thresholds.min_memory_free_ratio}")
    if cpu_pct is not None and cpu_pct > thresholds.max_cpu_pct:
        degraded.append(f"cpu_utilization_pct={cpu_pct}>{thresholds.max_cpu_pct}")
    for gpu in gpus:
        label = f"gpu{gpu.get('index')}"
        health = gpu.get("health")
        if health == "error":
            rejecting.append(f"{label}:health=error")
        elif health == "degraded":
            degraded.append(f"{label}:health=degraded")
        used, total = gpu.get("memory_used_mb"), gpu.get("memory_total_mb")
        if used is not None and total:
            ratio = round(used / total, 4)
            if ratio > thresholds.max_gpu_memory_ratio:
                degraded.append(f"{label}:memory_used_ratio={ratio}>{thresholds.max_gpu_memory_ratio}")
    if rejecting:
        return REJECTING, rejecting + degraded
    if degraded:
        return DEGRADED, degraded
    return ACCEPTING, []


def capacity_hint(memory: dict, cpu: dict, gpus: list, thresholds: AdmissionThresholds) -> dict:
    """The snapshot's ``capacity_hint`` object."""
    ratio = memory_free_ratio(memory.get("free_mb"), memory.get("total_mb"))
    state, reasons = admission(ratio, cpu.get("utilization_pct"), gpus, thresholds)
    return {"memory_free_ratio": ratio, "admission_state": state, "admission_reasons": reasons}

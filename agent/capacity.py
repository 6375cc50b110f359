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
    max_engine_kv_usage_ratio: float = 0.95  # any engine at or above: degraded
    max_engine_requests_waiting: int = 32  # any engine with this many waiting: degraded


def memory_free_ratio(free_mb, total_mb):
    """Available / total host memory, 4 decimals; None when either is unknown."""
    if free_mb is None or not total_mb:
        return None
    return round(free_mb / total_mb, 4)


def engine_rules(engines, thresholds: AdmissionThresholds):
    """``(rejecting, degraded)`` reasons from the snapshot's engine objects (SPEC 13).

    No engine ``ok`` rejects, with one ``engine_<status>`` per status seen;
    an ``ok`` engine with a nearly full KV cache or a long queue degrades,
    named by its place in the ``engines`` list.
    """
    if not engines:
        return [], []
    if not any(engine.get("status") == "ok" for engine in engines):
        statuses = dict.fromkeys(engine.get("status") for engine in engines)
        return [f"engine_{status}" for status in statuses], []
    degraded = []
    for place, engine in enumerate(engines):
        if engine.get("status") != "ok":
            continue
        usage, waiting = engine.get("kv_cache_usage_ratio"), engine.get("requests_waiting")
        if usage is not None and usage >= thresholds.max_engine_kv_usage_ratio:
            degraded.append(f"engine{place}:kv_cache_usage_ratio={usage}>={thresholds.max_engine_kv_usage_ratio}")
        if waiting is not None and waiting >= thresholds.max_engine_requests_waiting:
            degraded.append(f"engine{place}:requests_waiting={waiting}>={thresholds.max_engine_requests_waiting}")
    return [], degraded


def admission(free_ratio, cpu_pct, gpus, thresholds: AdmissionThresholds, engines=None):
    """``(state, reasons)`` for host measurements, the snapshot's GPU entries and its engines.

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
    engine_rejecting, engine_degraded = engine_rules(engines, thresholds)
    rejecting += engine_rejecting
    degraded += engine_degraded
    if rejecting:
        return REJECTING, rejecting + degraded
    if degraded:
        return DEGRADED, degraded
    return ACCEPTING, []


def capacity_hint(memory: dict, cpu: dict, gpus: list, thresholds: AdmissionThresholds, engines=None) -> dict:
    """The snapshot's ``capacity_hint`` object."""
    ratio = memory_free_ratio(memory.get("free_mb"), memory.get("total_mb"))
    state, reasons = admission(ratio, cpu.get("utilization_pct"), gpus, thresholds, engines)
    return {"memory_free_ratio": ratio, "admission_state": state, "admission_reasons": reasons}

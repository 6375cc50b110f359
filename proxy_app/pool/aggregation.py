"""pool_resource (SPEC 5) from the pool's totals: a pure function.

``totals`` is the dict ``proxy_app.pool.summary.pool_totals()`` returns (the counts, sums,
averages, minima and maxima ``proxy_app.pool.columns`` reduces from its columns); nothing
here touches the database or the clock, so every rule is tested with plain
dicts.
"""

from controlplane.clock import age_s
from controlplane.endpoints.admission import Admission
from controlplane.figures import ratio
from proxy_app.ingest.engines import ENGINE_SOURCE, engine_section

SCHEMA_VERSION = 1
UNAVAILABLE = "unavailable"
RESOURCE_SOURCE = "agent_resource_snapshot"
LOAD_SOURCE = "instance_heartbeat"


def quality(present, expected):
    """``missing`` / ``partial`` / ``complete`` coverage of a metric."""
    if expected <= 0 or present <= 0:
        return "missing"
    return "complete" if present >= expected else "partial"


def source(value, label):
    return UNAVAILABLE if value is None else label


def admission(instances):
    """The pool's admission state and reason, first matching rule wins."""
    alive, reporting = instances["alive"], instances["with_resource"]
    accepting, degraded, rejecting = (instances[state] for state in Admission.values)
    missing = instances["missing_resource"]
    if alive == 0:
        state = Admission.REJECTING
    elif reporting > 0 and rejecting == reporting and missing == 0:
        state = Admission.REJECTING
    elif degraded or rejecting or missing > 0:
        state = Admission.DEGRADED
    else:
        state = Admission.ACCEPTING
    reason = f"{accepting} accepting, {degraded} degraded, {rejecting} rejecting, {alive} alive"
    return state, reason


def _int_or_none(value):
    return None if value is None else int(value)


def _age(now, reported_at):
    """``clock.age_s`` to the millisecond."""
    age = age_s(now, reported_at)
    return None if age is None else round(age, 3)


def build_pool_resource(totals, *, now, ttl_s, capacity, proxy_id):
    total, alive, reporting = totals["total"], totals["alive"], totals["reporting"]
    instances = {
        "total": total,
        "alive": alive,
        "stale": total - alive,
        "with_resource": reporting,
        "missing_resource": alive - reporting,
        **{state: totals[state] for state in Admission.values},
    }

    inflight_total = _int_or_none(totals["inflight_total"])
    qps_total = totals["qps_1m_total"]
    capacity = int(capacity or 0)
    load_ratio = inflight_total / capacity if inflight_total is not None and capacity > 0 else None
    load = {
        "inflight_total": inflight_total,
        "qps_1m_total": qps_total,
        "capacity": capacity,
        "load_ratio": load_ratio,
        # This project has no request queue: unknown, not zero.
        "prepare_queue_depth": None,
        "ready_queue_depth": None,
        "queue_pressure": None,
    }

    utilization = {
        "cpu_avg": totals["cpu_avg"],
        "cpu_max": totals["cpu_max"],
        "memory_used_mb": totals["memory_used_mb"],
        "memory_total_mb": totals["memory_total_mb"],
        "memory_used_ratio": ratio(totals["memory_used_mb"], totals["memory_total_mb"]),
        "memory_free_ratio_min": totals["memory_free_ratio_min"],
        "gpu_util_avg": totals["gpu_util_avg"],
        "gpu_util_max": totals["gpu_util_max"],
        "gpu_mem_used_mb": totals["gpu_mem_used_mb"],
        "gpu_mem_total_mb": totals["gpu_mem_total_mb"],
        "gpu_mem_used_ratio": ratio(totals["gpu_mem_used_mb"], totals["gpu_mem_total_mb"]),
        "network_rx_mbps_total": totals["network_rx_mbps_total"],
        "network_tx_mbps_total": totals["network_tx_mbps_total"],
        "gpu_count_total": _int_or_none(totals["gpu_count_total"]),
    }

    freshness = {
        "min": _age(now, totals["reported_at_max"]),
        "avg": _age(now, totals["reported_at_avg"]),
        "max": _age(now, totals["reported_at_min"]),
    }
    state, reason = admission(instances)
    has_resource = reporting > 0
    engine = engine_section(totals, totals["engine_model_groups"])

    return {
        "schema_version": SCHEMA_VERSION,
        "proxy_id": proxy_id,
        "generated_at": now,
        "ttl_s": ttl_s,
        "instances": instances,
        "load": load,
        "utilization": utilization,
        "resource_freshness_s": freshness,
        "pool_admission_state": state.value,
        "pool_admission_reason": reason,
        "engine": engine,
        "metric_source": {
            "instances": "proxy_instance_pool_ttl",
            "resource": RESOURCE_SOURCE if has_resource else UNAVAILABLE,
            "inflight_total": source(inflight_total, LOAD_SOURCE),
            "qps_1m_total": source(qps_total, LOAD_SOURCE),
            "load_ratio": source(load_ratio, "inflight_total/capacity"),
            "capacity": "proxy_config",
            "prepare_queue_depth": UNAVAILABLE,
            "ready_queue_depth": UNAVAILABLE,
            "queue_pressure": UNAVAILABLE,
            "utilization": RESOURCE_SOURCE if has_resource else UNAVAILABLE,
            "pool_admission_state": "instance_capacity_hint" if has_resource else "proxy_instance_pool_ttl",
            "resource_freshness_s": "proxy_receive_time" if has_resource else UNAVAILABLE,
            "engine": ENGINE_SOURCE if totals["instances_engine_ok"] else UNAVAILABLE,
        },
        "metric_quality": {
            "resource": quality(reporting, alive),
            "load": quality(totals["inflight_reported"] + totals["qps_1m_reported"], 2 * alive),
            "queue": "missing",
            "engine": quality(totals["instances_engine_ok"], alive),
        },
    }

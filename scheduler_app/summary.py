"""The few figures of a stored pool_resource that trend charts plot.

A summary is stored exactly as the proxy sent it (SPEC 6: any JSON object,
not interpreted), so reading figures out of it must never fail: anything that
is not a usable number or word gives None.
"""

import math

from controlplane.parsers import MAX_DB_INT

ADMISSION_STATE_LENGTH = 32


def _section(summary, name):
    value = summary.get(name) if isinstance(summary, dict) else None
    return value if isinstance(value, dict) else {}


def _count(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    value = int(value)
    return value if 0 <= value <= MAX_DB_INT else None


def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _word(value):
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip().lower()[:ADMISSION_STATE_LENGTH]


def summary_columns(summary):
    """The chart columns of a pool_resource (SPEC 5 shape), None where absent."""
    instances = _section(summary, "instances")
    utilization = _section(summary, "utilization")
    return {
        "instances_alive": _count(instances.get("alive")),
        "instances_total": _count(instances.get("total")),
        "cpu_avg": _number(utilization.get("cpu_avg")),
        "gpu_util_avg": _number(utilization.get("gpu_util_avg")),
        "memory_used_ratio": _number(utilization.get("memory_used_ratio")),
        "pool_admission_state": _word(summary.get("pool_admission_state") if isinstance(summary, dict) else None),
    }

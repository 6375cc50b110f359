"""The few figures of a pool_resource (SPEC 5) that the trend series keep.

Both roles store them: the Proxy from the summary it computes, the Scheduler
from each summary a Proxy sends. A summary received by the Scheduler is
stored exactly as sent (SPEC 6: any JSON object, not interpreted), so reading
figures out of it must never fail: anything that is not a usable number or
word gives None.
"""

import math

from controlplane.figures import MAX_DB_INT

ADMISSION_STATE_LENGTH = 32
# The series columns taken from a summary, in the order the API shows them.
COUNT_FIGURES = ("alive", "total", "with_resource")
UTILIZATION_FIGURES = ("cpu_avg", "memory_used_ratio", "gpu_util_avg", "gpu_mem_used_ratio", "network_rx_mbps_total",
                       "network_tx_mbps_total")


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
    """The series columns of a pool_resource (SPEC 5 shape), None where absent."""
    instances = _section(summary, "instances")
    utilization = _section(summary, "utilization")
    return {
        **{name: _count(instances.get(name)) for name in COUNT_FIGURES},
        **{name: _number(utilization.get(name)) for name in UTILIZATION_FIGURES},
        "pool_admission_state": _word(summary.get("pool_admission_state") if isinstance(summary, dict) else None),
    }

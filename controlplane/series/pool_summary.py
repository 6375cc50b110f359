"""The few figures of a pool_resource (SPEC 5) that the trend series keep.

Both roles store them: the Proxy from the summary it computes, the Scheduler
from each summary a Proxy sends. A summary received by the Scheduler is
stored exactly as sent (SPEC 6: any JSON object, not interpreted), so reading
figures out of it must never fail: anything that is not a usable number or
word gives None.
"""

from controlplane.figures import MAX_DB_INT, finite, whole

ADMISSION_STATE_LENGTH = 32
# The series columns taken from a summary, in the order the API shows them.
COUNT_FIGURES = ("alive", "total", "with_resource")
UTILIZATION_FIGURES = ("cpu_avg", "memory_used_ratio", "gpu_util_avg", "gpu_mem_used_ratio", "network_rx_mbps_total",
                       "network_tx_mbps_total")


def _section(summary, name):
    value = summary.get(name) if isinstance(summary, dict) else None
    return value if isinstance(value, dict) else {}


def _word(value):
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip().lower()[:ADMISSION_STATE_LENGTH]


def summary_columns(summary):
    """The series columns of a pool_resource (SPEC 5 shape), None where absent."""
    instances = _section(summary, "instances")
    utilization = _section(summary, "utilization")
    return {
        **{name: whole(instances.get(name), 0, MAX_DB_INT) for name in COUNT_FIGURES},
        **{name: finite(utilization.get(name)) for name in UTILIZATION_FIGURES},
        "pool_admission_state": _word(summary.get("pool_admission_state") if isinstance(summary, dict) else None),
    }

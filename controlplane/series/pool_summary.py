"""The figures of a pool_resource (SPEC 5) that the trend series keep and the pages show.

Both roles store them: the Proxy from the summary it computes, the Scheduler
from each summary a Proxy sends. A summary received by the Scheduler is
stored exactly as sent (SPEC 6: any JSON object, not interpreted), so reading
figures out of it must never fail: anything that is not a usable number or
word gives None. ``summary_columns`` is what a series row keeps; ``pool_view``
what the pool page and a proxy's page show of one summary (the same way).
"""

from controlplane.endpoints.admission import Admission
from controlplane.figures import MAX_DB_INT, as_percent, finite, whole

ADMISSION_STATE_LENGTH = 32
# The series columns taken from a summary, in the order the API shows them.
COUNT_FIGURES = ("alive", "total", "with_resource")
UTILIZATION_FIGURES = ("cpu_avg", "memory_used_ratio", "gpu_util_avg", "gpu_mem_used_ratio", "network_rx_mbps_total",
                       "network_tx_mbps_total")
# From the summary's ``engine`` section (SPEC 13).
ENGINE_FIGURES = ("requests_waiting_total", "kv_cache_usage_max", "saturation")


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
    engine = _section(summary, "engine")
    return {
        **{name: whole(instances.get(name), 0, MAX_DB_INT) for name in COUNT_FIGURES},
        **{name: finite(utilization.get(name)) for name in UTILIZATION_FIGURES},
        **{name: finite(engine.get(name)) for name in ENGINE_FIGURES},
        "pool_admission_state": _word(summary.get("pool_admission_state") if isinstance(summary, dict) else None),
    }


# Its parts a page shows as they were sent (a malformed one is {}).
SECTIONS = ("instances", "load", "utilization", "engine", "resource_freshness_s", "metric_source", "metric_quality")


def load_view(load, capacity_configured):
    """The Load card's capacity part: ``capacity_note`` says why no load ratio is shown, None when it is.

    A pool without a configured capacity (``FLEETWATCH_PROXY_CAPACITY`` unset
    or 0: a capacity of 0) has no load ratio, and one note says so, as does an
    older proxy's that sent its former default 8 with ``capacity_configured``
    false. ``capacity_configured`` is None when the proxy did not say (a
    foreign one): its figure is shown as sent.
    """
    capacity = whole(load.get("capacity"))
    if capacity is None or capacity <= 0 or capacity_configured is False:
        note = "capacity not configured"
    else:
        note = None
    return {"capacity": capacity, "load_ratio": None if note else finite(load.get("load_ratio")),
            "capacity_note": note}


def pool_view(summary, reported_at, now, capacity_configured=None):
    """A pool_resource as the pages show it: the series columns, the shares in percent, the counts by
    admission state, when it was made or received (``reported_at``), its parts (``sections``) and its
    load against capacity (``load_view``); None wherever the summary lacks a figure."""
    figures = summary_columns(summary)
    sections = {name: _section(summary, name) for name in SECTIONS}
    instances, utilization = sections["instances"], sections["utilization"]
    return {
        "load": load_view(sections["load"], capacity_configured),
        **figures,
        "memory_used_pct": as_percent(figures["memory_used_ratio"]),
        "gpu_mem_used_pct": as_percent(figures["gpu_mem_used_ratio"]),
        "kv_cache_usage_max_pct": as_percent(figures["kv_cache_usage_max"]),
        "saturation_pct": as_percent(figures["saturation"]),
        "gpu_count_total": whole(utilization.get("gpu_count_total")),
        "admission_reason": summary.get("pool_admission_reason") if isinstance(summary, dict) else None,
        **{state: whole(instances.get(state)) for state in Admission.values},
        "reported_at": reported_at,
        "age_s": None if reported_at is None else max(0.0, now - reported_at),
        "sections": sections,
    }

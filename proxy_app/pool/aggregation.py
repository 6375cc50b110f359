"""pool_resource's rules (SPEC 5): pure functions of the pool's totals.

``proxy_app.pool.answers`` declares the summary's keys once, for the schema
and for its builder, and names these functions as where each value worked
out comes from; their arguments are totals (the counts, sums, averages,
minima and maxima ``proxy_app.pool.columns`` reduces from its columns) and
the summary's own inputs (``now``, ``capacity``). Nothing here touches the
database or the clock, so every rule is tested with plain values.
"""

from controlplane.clock import age_s
from controlplane.endpoints.admission import Admission
from proxy_app.ingest.engines import ENGINE_SOURCE

SCHEMA_VERSION = 1
UNAVAILABLE = "unavailable"
RESOURCE_SOURCE = "agent_resource_snapshot"
LOAD_SOURCE = "instance_heartbeat"


def quality(present, expected):
    """``missing`` / ``partial`` / ``complete`` coverage of a metric."""
    if expected <= 0 or present <= 0:
        return "missing"
    return "complete" if present >= expected else "partial"


def load_quality(inflight_reported, qps_1m_reported, alive):
    """Coverage of the two load fields over the alive instances."""
    return quality(inflight_reported + qps_1m_reported, 2 * alive)


def admission(alive, reporting, accepting, degraded, rejecting):
    """The pool's admission state (its word) and reason, first matching rule wins."""
    missing = alive - reporting
    if alive == 0:
        state = Admission.REJECTING
    elif reporting > 0 and rejecting == reporting and missing == 0:
        state = Admission.REJECTING
    elif degraded or rejecting or missing > 0:
        state = Admission.DEGRADED
    else:
        state = Admission.ACCEPTING
    reason = f"{accepting} accepting, {degraded} degraded, {rejecting} rejecting, {alive} alive"
    return state.value, reason


def int_or_none(value):
    return None if value is None else int(value)


def count_or_zero(value):
    return int(value or 0)


def load_ratio(inflight_total, capacity):
    """inflight_total / capacity; null without either (a capacity of 0 or less is none)."""
    inflight_total, capacity = int_or_none(inflight_total), count_or_zero(capacity)
    return inflight_total / capacity if inflight_total is not None and capacity > 0 else None


def age(now, reported_at):
    """``clock.age_s`` to the millisecond."""
    seconds = age_s(now, reported_at)
    return None if seconds is None else round(seconds, 3)


def load_source(value):
    """A heartbeat's figure: from heartbeats, or unavailable when no instance sent it."""
    return UNAVAILABLE if value is None else LOAD_SOURCE


def load_ratio_source(inflight_total, capacity):
    return UNAVAILABLE if load_ratio(inflight_total, capacity) is None else "inflight_total/capacity"


def resource_source(reporting):
    """The snapshots' figures: from them, or unavailable when no alive instance reports one."""
    return RESOURCE_SOURCE if reporting else UNAVAILABLE


def admission_source(reporting):
    return "instance_capacity_hint" if reporting else "proxy_instance_pool_ttl"


def freshness_source(reporting):
    return "proxy_receive_time" if reporting else UNAVAILABLE


def engine_source(instances_engine_ok):
    return ENGINE_SOURCE if instances_engine_ok else UNAVAILABLE

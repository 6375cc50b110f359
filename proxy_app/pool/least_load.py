"""The original Proxy's least-load score for one instance, as ``/debug/instance_loads`` shows it: a pure function.

The original adds each known load signal times its weight: its own inflight counter (weight 1),
its queue manager's per-instance figures (the nine ``QUEUE_KEYS``) and the heartbeat's ``qps_1m``
(weight 0, so shown but never counted). An unknown signal is left out, never taken as 0, and
with no known signal the total is null. This Proxy places requests but runs no queue manager,
so every queue figure is unknown (null) and ``queue_source`` is ``unavailable``; the total is
the instance's heartbeat ``inflight`` where it has sent one.
"""

UNAVAILABLE = "unavailable"
LOAD_SOURCE = "instance_heartbeat"

# The original's queue-manager figures per instance, in its order; null here (no queue manager).
QUEUE_KEYS = (
    "prepare_queue_depth", "ready_queue_depth", "active_prepare", "active_ready",
    "pending_prefill_count", "active_decode_count", "next_slot_ready_in_ms", "prefill_free_in_ms",
    "predicted_total_backlog_ms",
)

# The original's default weights; the two readiness times are shown but have no weight.
WEIGHTS = {
    "inflight": 1.0,
    "active_prepare": 1.0,
    "active_ready": 1.0,
    "prepare_queue_depth": 0.25,
    "ready_queue_depth": 0.25,
    "pending_prefill_count": 1.0,
    "active_decode_count": 0.5,
    "predicted_total_backlog_ms": 0.001,
    "qps_1m": 0.0,
}


def least_load_score(inflight, qps_1m, queue=None):
    """``{"total", "components", "weighted_components", "source", "queue_source", "weights"}``.

    ``queue`` maps the ``QUEUE_KEYS`` to figures (None: no queue manager). ``components`` holds
    each known signal as a float, ``weighted_components`` those with a non-zero weight times it,
    ``total`` their sum or null when none is known.
    """
    components, sources = {}, {}
    if inflight is not None:
        components["inflight"], sources["inflight"] = float(inflight), LOAD_SOURCE
    for key in QUEUE_KEYS:
        value = (queue or {}).get(key)
        if value is not None:
            components[key], sources[key] = float(value), "proxy_queue_manager"
    if qps_1m is not None:
        components["qps_1m"], sources["qps_1m"] = float(qps_1m), LOAD_SOURCE
    weighted = {key: value * WEIGHTS[key] for key, value in components.items() if WEIGHTS.get(key)}
    return {
        "total": sum(weighted.values()) if weighted else None,
        "components": components,
        "weighted_components": weighted,
        "source": sources,
        "queue_source": UNAVAILABLE if queue is None else "proxy_queue_manager",
        "weights": dict(WEIGHTS),
    }

"""The Proxy's series (SPEC 9): each instance over time, and the pool's summary over time.

Both are written by the recorder (``manage.py run_recorder``), once a
second, never by the request that brought a snapshot: ingest costs the same
whatever the history holds. The same loop runs fencing's tick first
(``proxy_app.placement.fence_store.FenceSweeper``).

- ``record_pool``: the pool summary, computed as ``/debug/pool_resource``
  computes it (``proxy_app.pool.summary``), stored as one ``PoolResource`` row.
- ``record_instances``: one set-based INSERT … SELECT that copies the figures
  of every snapshot received since that instance's newest sample into
  ``InstanceSample``. The newest sample of each instance is found through
  the (instance_id, t) index, so a snapshot is copied once however many
  recorders run and in whatever order ingest commits; a snapshot replaced
  before the recorder saw it is the only thing not kept (the series'
  resolution is the recorder's tick).
"""

import functools
import logging
import time

from django.db import close_old_connections, connection, transaction

from controlplane import clock
from controlplane.db_outage import Outage, is_database_unavailable
from controlplane.series.history import Series
from controlplane.series.pool_summary import summary_columns
from proxy_app.models import InstanceMinute, InstanceResource, InstanceSample, PoolResource, PoolResourceMinute
from proxy_app.placement.fence_store import FenceSweeper
from proxy_app.pool.summary import pool_resource

log = logging.getLogger("fleetwatch.recorder")

OUTAGE = Outage("the recorder writes no series until it is back")
INSTANCES = Series(InstanceSample, InstanceMinute, key="instance_id")
POOL = Series(PoolResource, PoolResourceMinute)


def _ratio(quote, numerator, denominator):
    """numerator / denominator in SQL; null when the denominator is null or 0 (as in the pool summary)."""
    return f"CASE WHEN r.{quote(denominator)} > 0 THEN r.{quote(numerator)} / r.{quote(denominator)} END"


@functools.lru_cache(maxsize=4)
def _copy_sql(vendor):
    quote = connection.ops.quote_name
    sample, resource = quote(InstanceSample._meta.db_table), quote(InstanceResource._meta.db_table)
    same = {name: f"r.{quote(name)}" for name in ("instance_id", "cpu_util", "gpu_util_avg", "gpu_util_max",
                                                      "network_rx_mbps", "network_tx_mbps", "requests_waiting",
                                                      "requests_running", "kv_cache_usage_ratio", "admission_state")}
    figures = {
        **same,
        "t": f"r.{quote('resource_reported_at')}",
        "memory_used_ratio": _ratio(quote, "memory_used_mb", "memory_total_mb"),
        "gpu_mem_used_ratio": _ratio(quote, "gpu_mem_used_mb", "gpu_mem_total_mb"),
    }
    columns = ", ".join(quote(name) for name in figures)
    reported = f"r.{quote('resource_reported_at')}"
    return (
        f"INSERT INTO {sample} ({columns}) SELECT {', '.join(figures.values())} FROM {resource} r "
        f"WHERE {reported} IS NOT NULL AND r.{quote('has_raw_resource')} "
        f"AND {reported} > COALESCE((SELECT MAX(s.{quote('t')}) FROM {sample} s "
        f"WHERE s.{quote('instance_id')} = r.{quote('instance_id')}), 0)"
    )


def record_instances():
    """Copy every snapshot not yet in the instance series; returns how many rows were written."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_copy_sql(connection.vendor))
        return cursor.rowcount


def record_pool(now=None):
    """Store the pool summary of ``now`` as a PoolResource row; returns the row."""
    now = clock.now() if now is None else now
    summary = pool_resource(now)
    return PoolResource.objects.create(t=now, summary=summary, **summary_columns(summary))


def latest_pool_resource(max_age_s):
    """The newest PoolResource row if it is at most ``max_age_s`` old, else None."""
    row = PoolResource.objects.order_by("-t").first()
    if row is None or clock.now() - row.t > max_age_s:
        return None
    return row


def record(now=None):
    """One tick of the series: the pool summary, then the instance series."""
    now = clock.now() if now is None else now
    record_pool(now)
    return record_instances()


def run_recorder(stop, interval_s, monotonic=time.monotonic):
    """Every ``interval_s`` until ``stop`` (a threading.Event) is set: fencing's tick, then the series.

    Fencing's tick (``FenceSweeper``, SPEC 14.2) is its own step in this loop rather than a schedule:
    django-q2 schedules go no finer than a minute and a fence must come down within a second of its
    recovery time, and this loop already runs once per pool (``run_recorder`` holds the pool's lock).
    Fixed-rate: a slow tick shortens the next wait, and ticks missed while
    the database was busy are skipped rather than run back to back.
    """
    next_at = monotonic()
    failing = False
    fences = FenceSweeper()
    while not stop.is_set():
        close_old_connections()
        try:
            now = clock.now()
            fences.sweep(now)
            record(now)
        except Exception as exc:  # a locked or restarting database must not end the series
            if is_database_unavailable(exc):
                OUTAGE.failed(exc)  # one line, no traceback
            elif not failing:
                log.exception("recorder: a tick failed; going on")
            failing = True
        else:
            if not OUTAGE.recovered() and failing:
                log.info("recorder: recording again")
            failing = False
        next_at += interval_s
        now = monotonic()
        if next_at <= now:
            next_at = now + interval_s
        stop.wait(next_at - now)

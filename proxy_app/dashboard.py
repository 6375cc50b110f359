"""What the pool and instance pages show, gathered in a fixed number of queries (SPEC 8).

Views call one function here and hand its plain values to a template:

- ``pool_overview``: the pool summary (the recorder's newest row when it is
  fresh, else computed), instances per status, the scheduler link: 3–4
  queries, whatever the pool's size.
- ``pool_rows``: one page of instances, filtered, searched and sorted in
  SQL: a COUNT and one page query, so 10,000 instances cost what 10 do.
- ``instance_detail``: one instance with its latest snapshot taken apart
  for display, and its status changes: 2 queries.
- ``instance_series``, ``pool_series``: a stored series (SPEC 9) as chart columns: ≤ 2 queries.
"""

from dataclasses import dataclass, replace

import orjson
from django.db.models import F, Q

from controlplane.endpoints import liveness
from controlplane.endpoints.admission import Admission
from controlplane.endpoints.liveness import status_q
from controlplane.figures import percent
from controlplane.pages.charts import series_chart_data
from controlplane.pages.lists import ListQuery, paginate, status_counts_aggregates, status_rank
from proxy_app import pool
from proxy_app.capabilities import full_view
from proxy_app.history import INSTANCES, POOL, latest_pool_resource
from proxy_app.host_view import host_view
from proxy_app.listing import instance_rows
from proxy_app.models import Instance, InstanceStatusChange, SchedulerLinkState

# The recorder writes a summary every second; an older one means it is not running.
SUMMARY_MAX_AGE_S = 3.0
STATUS_CHANGES_SHOWN = 50
UNKNOWN_ADMISSION = "unknown"


def _timing():
    return Instance.ttl_s(), Instance.heartbeat_interval_s()


def resource_is_stale(reported_at, now):
    """A snapshot older than an instance's alive window is drawn as stale data."""
    ttl_s, interval_s = _timing()
    return reported_at is None or now - reported_at > liveness.alive_window(ttl_s, interval_s)


# --- the pool -----------------------------------------------------------------------


def pool_overview(now):
    """The summary cards' values: pool_resource, status counts, the scheduler link."""
    row = latest_pool_resource(SUMMARY_MAX_AGE_S)
    summary = row.summary if row is not None else pool.pool_resource(now)
    ttl_s, interval_s = _timing()
    counts = Instance.objects.aggregate(**status_counts_aggregates(now, ttl_s, interval_s))
    proxy_id = pool.proxy_id()
    return {
        "proxy_id": proxy_id,
        "summary": summary,
        "generated_at": summary.get("generated_at"),
        "counts": counts,
        "link": SchedulerLinkState.objects.status_of(proxy_id),
        "ttl_s": ttl_s,
    }


@dataclass(frozen=True)
class PoolQuery(ListQuery):
    """``/pool/``'s filters: status, admission, with resources only, search; sort; page; view."""

    reporting: bool = False
    view: str = "table"

    SORTS = {
        "state": "state", "age": "last seen", "cpu": "CPU", "memory": "memory", "gpu": "GPU",
        "reported": "report time", "id": "id",
    }
    ADMISSIONS = (*Admission.values, UNKNOWN_ADMISSION)
    VIEWS = ("table", "cards")

    def cleaned(self):
        query = super().cleaned()
        return query if query.view in self.VIEWS else replace(query, view="table")


def _pool_order(sort, desc, now):
    """ORDER BY of a sort key; ``desc`` flips the natural direction (busiest, newest first)."""
    ttl_s, interval_s = _timing()

    def natural(expression, high_first):
        first_high = high_first != desc
        return expression.desc(nulls_last=True) if first_high else expression.asc(nulls_last=True)

    orders = {
        "state": [natural(status_rank(now, ttl_s, interval_s), False), F("instance_id").asc()],
        "age": [natural(F("last_seen_at"), True)],
        "cpu": [natural(F("resource__cpu_util"), True)],
        # Least free first: the fullest hosts on top.
        "memory": [natural(F("resource__memory_free_ratio"), False)],
        "gpu": [natural(F("resource__gpu_util_avg"), True)],
        "reported": [natural(F("resource__resource_reported_at"), True)],
        "id": [natural(F("instance_id"), False)],
    }
    return [*orders[sort], F("instance_id").asc()]


def pool_queryset(query, now):
    """The instances ``query`` selects, sorted; the large columns are left in the database."""
    ttl_s, interval_s = _timing()
    instances = Instance.objects.select_related("resource").defer("meta", "endpoints", "tags", "capabilities")
    if query.status:
        instances = instances.filter(status_q(query.status, now, ttl_s, interval_s))
    if query.admission == UNKNOWN_ADMISSION:
        instances = instances.filter(Q(resource__isnull=True) | Q(resource__admission_state__isnull=True))
    elif query.admission:
        instances = instances.filter(resource__admission_state=query.admission)
    if query.reporting:
        instances = instances.filter(resource__has_raw_resource=True, resource__resource_reported_at__isnull=False)
    if query.q:
        instances = instances.filter(Q(instance_id__icontains=query.q) | Q(host__icontains=query.q))
    return instances.order_by(*_pool_order(query.sort, query.desc, now))


def instance_summary(instance, now):
    """One instance as a pool row or card: status, ages and the resource columns."""
    resource = instance.latest_resource
    status = instance.status_now(now).value
    row = {
        "instance_id": instance.instance_id,
        "address": instance.address,
        "status": status,
        "last_seen_at": instance.last_seen_at,
        "inflight": instance.inflight,
        "qps_1m": instance.qps_1m,
        "has_resource": False,
        "resource_stale": True,
        "admission": None, "cpu": None, "memory_used_mb": None, "memory_total_mb": None, "memory_pct": None,
        "gpu_count": None, "gpu_util": None, "gpu_util_max": None, "gpu_mem_pct": None,
        "rx_mbps": None, "tx_mbps": None, "reported_at": None,
    }
    if resource is not None and resource.has_raw_resource:
        row.update({
            "has_resource": True,
            "resource_stale": resource_is_stale(resource.resource_reported_at, now),
            "admission": resource.admission_state,
            "cpu": resource.cpu_util,
            "memory_used_mb": resource.memory_used_mb,
            "memory_total_mb": resource.memory_total_mb,
            "memory_pct": percent(resource.memory_used_mb, resource.memory_total_mb),
            "gpu_count": resource.gpu_count,
            "gpu_util": resource.gpu_util_avg,
            "gpu_util_max": resource.gpu_util_max,
            "gpu_mem_pct": percent(resource.gpu_mem_used_mb, resource.gpu_mem_total_mb),
            "rx_mbps": resource.network_rx_mbps,
            "tx_mbps": resource.network_tx_mbps,
            "reported_at": resource.resource_reported_at,
        })
    return row


def pool_rows(query, now):
    """``(rows, PageInfo)`` of one page of the pool: two queries."""
    instances, page = paginate(pool_queryset(query, now), query.page, query.per_page)
    return [instance_summary(instance, now) for instance in instances], page


# --- one instance ---------------------------------------------------------------------


def instance_detail(instance_id, now):
    """Everything the instance page shows, or None for an unknown id."""
    instance = Instance.objects.select_related("resource", "snapshot").filter(pk=instance_id).first()
    if instance is None:
        return None
    resource = instance.latest_resource
    detail = {
        **instance_summary(instance, now),
        "registered_at": instance.registered_at,
        "meta": instance.meta or {},
        "tags": instance.tags or [],
        "endpoints": instance.endpoints or [],
        "weight": instance.weight,
        "gpu_util_heartbeat": instance.gpu_util,
        "host": host_view(instance.raw_resource),
        "report_seq": resource.report_seq if resource else None,
        "gpu_sample_age_ms": resource.gpu_sample_age_ms if resource else None,
        "gpu_sample_coverage": resource.gpu_sample_coverage if resource else None,
        "gpu_sample_count_min": resource.gpu_sample_count_min if resource else None,
        "capabilities": full_view(instance.capabilities),
        "capability_fingerprint": instance.capability_fingerprint,
        "ttl_s": Instance.ttl_s(),
        "changes": list(
            InstanceStatusChange.objects.filter(instance_id=instance_id)
            .order_by("-at", "-id").values("old_status", "new_status", "reason", "at")[:STATUS_CHANGES_SHOWN]
        ),
        # Exactly the instance's /v1/instance/list row, as plain values for the JSON block.
        "row": orjson.loads(orjson.dumps(instance_rows(Instance.objects.filter(pk=instance.pk), now)[0])),
    }
    return detail


def instance_exists(instance_id):
    return Instance.objects.filter(pk=instance_id).exists()


# --- series ---------------------------------------------------------------------------


def instance_series(instance_id, range_name, now):
    return series_chart_data(INSTANCES, instance_id, range_name, now)


def pool_series(range_name, now):
    return series_chart_data(POOL, None, range_name, now)

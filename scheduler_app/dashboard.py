"""What the fleet and proxy pages show, gathered in a fixed number of queries (SPEC 8).

- ``fleet_overview``: proxies per status and the fleet's totals summed over
  the alive proxies' latest summaries: 2 queries.
- ``fleet_rows``: one page of proxies, filtered, searched and sorted in SQL,
  with a trend sparkline each from the stored series: 3 queries, whatever
  the number of proxies or points.
- ``proxy_detail``: one proxy, its summary taken apart, its status changes:
  2 queries.

A summary is stored as the proxy sent it (SPEC 6), so it is read through
``summary_columns`` and defensive lookups: a malformed one shows "–".
"""

from dataclasses import dataclass

from django.db.models import F, Q

from controlplane.api.serializers import endpoint_row
from controlplane.endpoints.admission import Admission
from controlplane.endpoints.liveness import status_q
from controlplane.figures import as_percent, whole
from controlplane.pages.charts import series_chart_data
from controlplane.pages.lists import ListQuery, paginate, status_counts_aggregates, status_rank
from controlplane.series.pool_summary import summary_columns
from scheduler_app.history import PROXY_POOLS
from scheduler_app.models import PoolResourceSample, Proxy, ProxyStatusChange
from scheduler_app.serializers import proxy_row

STATUS_CHANGES_SHOWN = 50
UNKNOWN_ADMISSION = "unknown"
SPARK_WINDOW_S = 15 * 60
SPARK_POINTS = 60


def _timing():
    return Proxy.ttl_s(), Proxy.heartbeat_interval_s()


def _section(summary, name):
    value = summary.get(name) if isinstance(summary, dict) else None
    return value if isinstance(value, dict) else {}


def summary_view(summary, reported_at, now):
    """The figures of a stored pool_resource a row or card shows, None where the summary lacks them."""
    figures = summary_columns(summary)
    utilization = _section(summary, "utilization")
    instances = _section(summary, "instances")
    return {
        **figures,
        "memory_used_pct": as_percent(figures["memory_used_ratio"]),
        "gpu_mem_used_pct": as_percent(figures["gpu_mem_used_ratio"]),
        "gpu_count_total": whole(utilization.get("gpu_count_total")),
        "admission_reason": summary.get("pool_admission_reason") if isinstance(summary, dict) else None,
        "accepting": whole(instances.get("accepting")),
        "degraded": whole(instances.get("degraded")),
        "rejecting": whole(instances.get("rejecting")),
        "reported_at": reported_at,
        "age_s": None if reported_at is None else max(0.0, now - reported_at),
    }


# --- the fleet ------------------------------------------------------------------------


def fleet_overview(now):
    """Proxies per status, and instances and admission states summed over the alive proxies."""
    ttl_s, interval_s = _timing()
    counts = Proxy.objects.aggregate(**status_counts_aggregates(now, ttl_s, interval_s))
    totals = {"alive": 0, "total": 0, "with_resource": 0, **{state: 0 for state in Admission.values},
              "reporting_proxies": 0}
    for summary in Proxy.objects.alive(now).values_list("pool_resource", flat=True):
        figures = summary_columns(summary)
        if figures["total"] is None:
            continue
        totals["reporting_proxies"] += 1
        for name in ("alive", "total", "with_resource"):
            totals[name] += figures[name] or 0
        state = figures["pool_admission_state"]
        if state in totals:
            totals[state] += 1
    return {"counts": counts, "totals": totals, "ttl_s": ttl_s}


@dataclass(frozen=True)
class FleetQuery(ListQuery):
    """``/fleet/``'s filters: status, pool admission, search; sort; page."""

    SORTS = {"state": "state", "age": "last seen", "instances": "instances", "cpu": "CPU", "memory": "memory",
             "gpu": "GPU", "id": "id"}
    ADMISSIONS = (*Admission.values, UNKNOWN_ADMISSION)


def _fleet_order(sort, desc, now):
    ttl_s, interval_s = _timing()

    def natural(expression, high_first):
        first_high = high_first != desc
        return expression.desc(nulls_last=True) if first_high else expression.asc(nulls_last=True)

    orders = {
        "state": [natural(status_rank(now, ttl_s, interval_s), False)],
        "age": [natural(F("last_seen_at"), True)],
        "instances": [natural(F("pool_resource__instances__alive"), True)],
        "cpu": [natural(F("pool_resource__utilization__cpu_avg"), True)],
        "memory": [natural(F("pool_resource__utilization__memory_used_ratio"), True)],
        "gpu": [natural(F("pool_resource__utilization__gpu_util_avg"), True)],
        "id": [natural(F("proxy_id"), False)],
    }
    return [*orders[sort], F("proxy_id").asc()]


def fleet_queryset(query, now):
    ttl_s, interval_s = _timing()
    proxies = Proxy.objects.all()
    if query.status:
        proxies = proxies.filter(status_q(query.status, now, ttl_s, interval_s))
    if query.admission == UNKNOWN_ADMISSION:
        proxies = proxies.filter(Q(pool_resource__isnull=True) | Q(pool_resource__pool_admission_state__isnull=True))
    elif query.admission:
        proxies = proxies.filter(pool_resource__pool_admission_state=query.admission)
    if query.q:
        proxies = proxies.filter(Q(proxy_id__icontains=query.q) | Q(host__icontains=query.q))
    return proxies.order_by(*_fleet_order(query.sort, query.desc, now))


def sparklines(proxy_ids, now):
    """CPU and GPU trend of each proxy over the last minutes: one query, ≤ SPARK_POINTS points each.

    The window is cut into SPARK_POINTS buckets and each keeps its newest
    sample; buckets without a sample are left out (the line goes on), a
    sample without the figure stays None (the line breaks: unknown).
    """
    rows = (PoolResourceSample.objects.filter(proxy_id__in=proxy_ids, t__gte=now - SPARK_WINDOW_S)
            .order_by("proxy_id", "t").values_list("proxy_id", "t", "cpu_avg", "gpu_util_avg"))
    bucket_s = SPARK_WINDOW_S / SPARK_POINTS
    buckets = {proxy_id: {} for proxy_id in proxy_ids}
    for proxy_id, t, cpu, gpu in rows:
        buckets[proxy_id][int((t - (now - SPARK_WINDOW_S)) // bucket_s)] = (cpu, gpu)  # the newest wins
    return {
        proxy_id: {"cpu": [cpu for _, (cpu, _) in sorted(samples.items())],
                   "gpu": [gpu for _, (_, gpu) in sorted(samples.items())]}
        for proxy_id, samples in buckets.items()
    }


def proxy_summary(proxy, now):
    return {
        "proxy_id": proxy.proxy_id,
        "address": proxy.address,
        "status": proxy.status_now(now).value,
        "last_seen_at": proxy.last_seen_at,
        "proxy_url": proxy.meta.get("proxy_url") if isinstance(proxy.meta, dict) else None,
        "pool": summary_view(proxy.pool_resource, proxy.pool_resource_reported_at, now),
    }


def fleet_rows(query, now):
    """``(rows, PageInfo)`` of one page of proxies, each with its sparklines."""
    proxies, page = paginate(fleet_queryset(query, now), query.page, query.per_page)
    trends = sparklines([proxy.proxy_id for proxy in proxies], now) if proxies else {}
    rows = [{**proxy_summary(proxy, now), "trend": trends.get(proxy.proxy_id)} for proxy in proxies]
    return rows, page


# --- one proxy ------------------------------------------------------------------------


def proxy_detail(proxy_id, now):
    """Everything the proxy page shows, or None for an unknown id."""
    proxy = Proxy.objects.filter(pk=proxy_id).first()
    if proxy is None:
        return None
    summary = proxy.pool_resource if isinstance(proxy.pool_resource, dict) else {}
    return {
        **proxy_summary(proxy, now),
        **{key: value for key, value in endpoint_row(proxy, now).items() if key in ("registered_at", "tags", "weight")},
        "summary": summary,
        "sections": {name: _section(summary, name) for name in
                     ("instances", "load", "utilization", "resource_freshness_s", "metric_source", "metric_quality")},
        "capacity": {
            "max_capacity": proxy.max_capacity, "instance_count": proxy.instance_count,
            "kv_mem_per_instance_gb": proxy.kv_mem_per_instance_gb, "kv_cache_pool_gb": proxy.kv_cache_pool_gb,
            "kv_cache_update_policy": proxy.kv_cache_update_policy,
        },
        "load": {"inflight": proxy.inflight, "qps_1m": proxy.qps_1m, "gpu_util": proxy.gpu_util},
        "changes": list(
            ProxyStatusChange.objects.filter(proxy_id=proxy_id)
            .order_by("-at", "-id").values("old_status", "new_status", "reason", "at")[:STATUS_CHANGES_SHOWN]
        ),
        "row": proxy_row(proxy, now),
        "ttl_s": Proxy.ttl_s(),
    }


def proxy_exists(proxy_id):
    return Proxy.objects.filter(pk=proxy_id).exists()


def proxy_series(proxy_id, range_name, now):
    """A proxy's stored summaries as chart columns, ratios in percent, with ``stale`` = total − alive."""
    return series_chart_data(PROXY_POOLS, proxy_id, range_name, now)

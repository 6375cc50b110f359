"""The Scheduler's dashboards (SPEC 8): ``/fleet/`` and ``/fleet/proxies/<id>/``, declared on the kit.

``controlplane.pages.kit`` serves the pages, their fragments and their URLs;
what is the fleet's own is here:

- ``overview``: proxies per status and the fleet's totals summed over the
  alive proxies' latest summaries: 2 queries.
- ``rows``: one page of proxies with a trend sparkline each from the stored
  series (the kit's COUNT and page query, and one for the trends).
- ``list_panels``: the "which pool would a request go to" panel
  (``scheduler_app.placement_pages``), the board of pools asked as a dry run.
- ``detail``: one proxy, its summary taken apart, its status changes: 2 queries.

A summary is stored as the proxy sent it (SPEC 6), so it is read through
``pool_view`` and defensive lookups: a malformed one shows "–".
"""

from dataclasses import dataclass

from controlplane.endpoints.admission import Admission
from controlplane.pages.charts import POOL_CHARTS
from controlplane.pages.kit import EntryDashboard
from controlplane.pages.lists import STATE, ListQuery, Sort
from controlplane.series.pool_summary import COUNT_FIGURES, pool_view, summary_columns
from scheduler_app import placement_pages
from scheduler_app.history import PROXY_POOLS
from scheduler_app.models import PoolResourceSample, Proxy
from scheduler_app.serializers import proxy_rows

SPARK_WINDOW_S = 15 * 60
SPARK_POINTS = 60


@dataclass(frozen=True)
class FleetQuery(ListQuery):
    """``/fleet/``'s filters: status, pool admission, search; sort; page."""

    SORTS = {
        "state": STATE,
        "age": Sort("last seen", "last_seen_at", high_first=True),
        "instances": Sort("instances", "pool_resource__instances__alive", high_first=True),
        "cpu": Sort("CPU", "pool_resource__utilization__cpu_avg", high_first=True),
        "memory": Sort("memory", "pool_resource__utilization__memory_used_ratio", high_first=True),
        "gpu": Sort("GPU", "pool_resource__utilization__gpu_util_avg", high_first=True),
        # The pools' serving engines (SPEC 13): the most saturated, the longest queue first.
        "saturation": Sort("saturation", "pool_resource__engine__saturation", high_first=True),
        "waiting": Sort("waiting", "pool_resource__engine__requests_waiting_total", high_first=True),
        "id": Sort("id", "proxy_id"),
    }


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


def declared_capacity(proxy):
    """What the proxy declared on register (SPEC 6), None for a figure left at its default of 0 (declared by
    nobody); ``max_capacity_default`` when our link says the capacity is its setting's default."""
    meta = proxy.meta if isinstance(proxy.meta, dict) else {}

    def declared(value):
        return value if value else None

    return {
        "max_capacity": declared(proxy.max_capacity),
        "max_capacity_default": meta.get("capacity_configured") is False,
        "instance_count": declared(proxy.instance_count),
        "kv_mem_per_instance_gb": declared(proxy.kv_mem_per_instance_gb),
        "kv_cache_pool_gb": declared(proxy.kv_cache_pool_gb),
        "kv_cache_update_policy": proxy.kv_cache_update_policy,
    }


def _add_engine(totals, figures, proxy_id):
    """Fold one pool's engine figures into the fleet's: the queues summed, the most saturated pool kept."""
    if figures["requests_waiting_total"] is not None:
        totals["requests_waiting_total"] = (totals["requests_waiting_total"] or 0) + int(figures["requests_waiting_total"])
    saturation = figures["saturation"]
    if saturation is not None and (totals["saturation_max"] is None or saturation > totals["saturation_max"]):
        totals["saturation_max"], totals["saturated_pool"] = saturation, proxy_id


class FleetPages(EntryDashboard):
    name, entry, entries = "fleet", "proxy", "proxies"
    model = Proxy
    query = FleetQuery
    admission_field = "pool_resource__pool_admission_state"
    admission_label = "Pool admission"
    entry_charts, entry_series = POOL_CHARTS, PROXY_POOLS

    def list_panels(self, request, now):
        return placement_pages.page_context(request.GET, now)

    def overview(self, now):
        """Proxies per status, and instances and admission states summed over the alive proxies."""
        totals = {**dict.fromkeys(COUNT_FIGURES, 0), **dict.fromkeys(Admission.values, 0), "reporting_proxies": 0,
                  "requests_waiting_total": None, "saturation_max": None, "saturated_pool": None}
        for proxy_id, summary in Proxy.objects.alive(now).values_list("proxy_id", "pool_resource"):
            figures = summary_columns(summary)
            if figures["total"] is None:
                continue
            totals["reporting_proxies"] += 1
            for name in COUNT_FIGURES:
                totals[name] += figures[name] or 0
            state = figures["pool_admission_state"]
            if state in totals:
                totals[state] += 1
            _add_engine(totals, figures, proxy_id)
        return {"counts": self.status_counts(now), "totals": totals, "ttl_s": Proxy.ttl_s()}

    def summary(self, proxy, now):
        meta = proxy.meta if isinstance(proxy.meta, dict) else {}
        configured = meta.get("capacity_configured")  # our link says; another proxy may not
        return {
            "proxy_id": proxy.proxy_id,
            "address": proxy.address,
            "status": proxy.status_now(now).value,
            "last_seen_at": proxy.last_seen_at,
            "proxy_url": meta.get("proxy_url"),
            "pool": pool_view(proxy.pool_resource, proxy.pool_resource_reported_at, now,
                              capacity_configured=configured if isinstance(configured, bool) else None),
        }

    def rows(self, entries, now):
        trends = sparklines([proxy.proxy_id for proxy in entries], now) if entries else {}
        return [{**self.summary(proxy, now), "trend": trends.get(proxy.proxy_id)} for proxy in entries]

    def detail(self, entry_id, now):
        proxy = Proxy.objects.filter(pk=entry_id).first()
        if proxy is None:
            return None
        return {
            **self.summary(proxy, now),
            "registered_at": proxy.registered_at, "tags": proxy.tags, "weight": proxy.weight,
            "summary": proxy.pool_resource if isinstance(proxy.pool_resource, dict) else {},
            "capacity": declared_capacity(proxy),
            "load": {"inflight": proxy.inflight, "qps_1m": proxy.qps_1m, "gpu_util": proxy.gpu_util},
            "changes": self.status_changes(entry_id),
            "row": proxy_rows(Proxy.objects.filter(pk=proxy.pk), now)[0],
            "ttl_s": Proxy.ttl_s(),
        }


FLEET_PAGES = FleetPages()

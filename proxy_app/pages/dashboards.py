"""The Proxy's dashboards (SPEC 8): ``/pool/`` and ``/pool/instances/<id>/``, declared on the kit.

``controlplane.pages.kit`` serves the pages, their fragments and their URLs;
what is the pool's own is here:

- ``overview``: the pool summary (the recorder's newest row when it is
  fresh, else computed), instances per status, the scheduler link: 3
  queries with the recorder's row, 5 without, whatever the pool's size.
- ``rows``: one page of instances with their resource columns (the kit's
  COUNT and page query: 10,000 instances cost what 10 do).
- ``list_panels``: the "where would a request go" panel
  (``proxy_app.pages.placement_panel``), answered by this process's placement
  board as a dry run: no query when the board is fresh, else its refresh; and
  the cached-tokens audit (``proxy_app.pages.cache_audit``): 2 queries.
- ``detail``: one instance with its latest snapshot taken apart for
  display, its status changes and its list row: 3 queries.
"""

from dataclasses import dataclass, replace

import orjson
from django.conf import settings

from agent.capabilities import full_view
from controlplane.endpoints import liveness
from controlplane.figures import percent
from controlplane.pages.charts import POOL_CHARTS, chart
from controlplane.pages.kit import EntryDashboard
from controlplane.pages.lists import STATE, ListQuery, Sort
from controlplane.series.pool_summary import pool_view
from proxy_app.api.listing import instance_rows
from proxy_app.models import Instance
from proxy_app.ops.history import INSTANCES, POOL, latest_pool_resource
from proxy_app.pages import cache_audit, placement_panel
from proxy_app.pages.host_view import host_view
from proxy_app.placement import fence_store
from proxy_app.pool.answers import link_status
from proxy_app.pool.summary import pool_resource, proxy_id

# The recorder writes a summary every second; an older one means it is not running.
SUMMARY_MAX_AGE_S = 3.0

INSTANCE_CHARTS = (
    chart("CPU", "%", [("cpu_util", "CPU")], 100),
    chart("Memory used", "%", [("memory_used_ratio", "memory")], 100),
    chart("GPU utilisation", "%", [("gpu_util_avg", "average"), ("gpu_util_max", "busiest GPU")], 100),
    chart("GPU memory used", "%", [("gpu_mem_used_ratio", "GPU memory")], 100),
    chart("Network", "Mbit/s", [("network_rx_mbps", "rx"), ("network_tx_mbps", "tx")]),
    chart("Engine queue", "requests", [("requests_waiting", "waiting"), ("requests_running", "running")]),
    chart("KV cache used", "%", [("kv_cache_usage_ratio", "KV cache")], 100),
)


@dataclass(frozen=True)
class PoolQuery(ListQuery):
    """``/pool/``'s filters: status, admission, with resources only, with a waiting queue, fenced, search;
    sort; page; view."""

    reporting: bool = False
    queued: bool = False
    fenced: bool = False
    view: str = "table"

    SORTS = {
        "state": STATE,
        "age": Sort("last seen", "last_seen_at", high_first=True),
        "cpu": Sort("CPU", "resource__cpu_util", high_first=True),
        # Least free first: the fullest hosts on top.
        "memory": Sort("memory", "resource__memory_free_ratio"),
        "gpu": Sort("GPU", "resource__gpu_util_avg", high_first=True),
        # The engines' queue and KV cache (SPEC 13): the longest queue, the fullest cache first.
        "waiting": Sort("waiting", "resource__requests_waiting", high_first=True),
        "kv": Sort("KV cache", "resource__kv_cache_usage_ratio", high_first=True),
        "reported": Sort("report time", "resource__resource_reported_at", high_first=True),
        "id": Sort("id", "instance_id"),
    }
    VIEWS = ("table", "cards")

    def cleaned(self):
        query = super().cleaned()
        return query if query.view in self.VIEWS else replace(query, view="table")


class PoolPages(EntryDashboard):
    name, entry, entries = "pool", "instance", "instances"
    model = Instance
    query = PoolQuery
    admission_field = "resource__admission_state"
    list_charts, list_series = POOL_CHARTS, POOL
    entry_charts, entry_series = INSTANCE_CHARTS, INSTANCES

    def entries_queryset(self):
        # The large columns stay in the database.
        return Instance.objects.select_related("resource").defer("meta", "endpoints", "tags", "capabilities")

    def narrow(self, entries, query):
        if query.reporting:
            entries = entries.filter(resource__has_raw_resource=True, resource__resource_reported_at__isnull=False)
        if query.queued:
            entries = entries.filter(resource__requests_waiting__gt=0)
        if query.fenced:
            entries = entries.filter(fence_store.effective_fence_q())
        return entries

    def list_panels(self, request, now):
        return {**placement_panel.page_context(request.GET, now), **cache_audit.audit_context()}

    def overview(self, now):
        """The summary cards' values: pool_resource, status counts, the scheduler link."""
        row = latest_pool_resource(SUMMARY_MAX_AGE_S)
        summary = row.summary if row is not None else pool_resource(now)
        this_proxy = proxy_id()
        return {
            "proxy_id": this_proxy,
            "summary": summary,
            "pool": pool_view(summary, summary.get("generated_at"), now,
                              capacity_configured=settings.FLEETWATCH_PROXY_CAPACITY_CONFIGURED),
            "generated_at": summary.get("generated_at"),
            "counts": self.status_counts(now),
            "link": link_status(this_proxy),
            "ttl_s": Instance.ttl_s(),
        }

    def rows(self, entries, now):
        return [self.summary(instance, now) for instance in entries]

    def resource_is_stale(self, reported_at, now):
        """A snapshot older than an instance's alive window is drawn as stale data."""
        return reported_at is None or now - reported_at > liveness.alive_window(*self.timing())

    def summary(self, instance, now):
        """One instance as a pool row or card: status, ages and the resource columns."""
        resource = instance.latest_resource
        fenced, fence_reason = fence_store.fence_of(instance)
        row = {
            "instance_id": instance.instance_id,
            "fenced": fenced,
            "fence_reason": fence_reason,
            "address": instance.address,
            "status": instance.status_now(now).value,
            "last_seen_at": instance.last_seen_at,
            "inflight": instance.inflight,
            "qps_1m": instance.qps_1m,
            "has_resource": False,
            "resource_stale": True,
            "admission": None, "cpu": None, "memory_used_mb": None, "memory_total_mb": None, "memory_pct": None,
            "gpu_count": None, "gpu_util": None, "gpu_util_max": None, "gpu_mem_pct": None,
            "rx_mbps": None, "tx_mbps": None, "reported_at": None,
            "engine_count": None, "engine_status": None, "requests_waiting": None, "requests_running": None,
            "kv_pct": None,
        }
        if resource is not None and resource.has_raw_resource:
            row.update({
                "has_resource": True,
                "resource_stale": self.resource_is_stale(resource.resource_reported_at, now),
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
                "engine_count": resource.engine_count,
                "engine_status": resource.engine_status,
                "requests_waiting": resource.requests_waiting,
                "requests_running": resource.requests_running,
                "kv_pct": percent(resource.kv_cache_usage_ratio, 1),
            })
        return row

    def fence(self, instance):
        """The fence card's figures (SPEC 14.2). ``stored`` is false while the trouble of a report keeps the
        instance out before the recorder has written the fence: it is fenced since that report."""
        resource = instance.latest_resource
        return {
            "stored": instance.fenced,
            "since": instance.fence_changed_at if instance.fenced else
            resource.resource_reported_at if resource is not None else None,
            "changed_at": instance.fence_changed_at,
            "router_errors": instance.fence_errors,
            "errors_to_fence": settings.FLEETWATCH_FENCE_ERRORS,
            "quiet_since": instance.fence_quiet_since,
            "recovery_s": settings.FLEETWATCH_FENCE_RECOVERY_S,
        }

    def detail(self, entry_id, now):
        instance = Instance.objects.select_related("resource", "snapshot").filter(pk=entry_id).first()
        if instance is None:
            return None
        resource = instance.latest_resource
        return {
            **self.summary(instance, now),
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
            "fence": self.fence(instance),
            "changes": self.status_changes(entry_id),
            # Exactly the instance's /v1/instance/list row, as plain values for the JSON block.
            "row": orjson.loads(orjson.dumps(instance_rows(Instance.objects.filter(pk=instance.pk), now)[0])),
        }


POOL_PAGES = PoolPages()

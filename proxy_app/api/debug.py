"""``/debug/*`` (SPEC 3, 5): read-only views of the pool for operators, the original's UI and the scheduler link."""

from rest_framework.decorators import action
from rest_framework.response import Response

from controlplane import clock
from controlplane.api.viewsets import ControlPlaneViewSet, query_bool
from proxy_app.api.listing import load_rows, resource_rows
from proxy_app.api.openapi import pool_debug_schema
from proxy_app.models import Instance, SchedulerLinkState
from proxy_app.ops.history import POOL
from proxy_app.pool.least_load import LOAD_SOURCE, UNAVAILABLE
from proxy_app.pool.summary import pool_resource, proxy_id

NULL_SEMANTICS = "0 means measured zero; null means unavailable, not wired, or unknown"
# How many alive instance ids /debug/status shows (the original CLI's sample).
SAMPLE_IDS = 10


@pool_debug_schema
class PoolDebugViewSet(ControlPlaneViewSet):
    """Read-only views of the pool for operators and the scheduler link."""

    @action(detail=False, methods=["get"])
    def status(self, request):
        now = clock.now()
        total = Instance.objects.count()
        alive = Instance.objects.alive(now)
        alive_count = alive.count()
        return Response({
            "ok": True,
            "ttl_s": Instance.ttl_s(),
            "alive_instances": alive_count,
            "total_instances": total,
            "expired_instances": total - alive_count,
            "sample_ids": list(alive.values_list("instance_id", flat=True)[:SAMPLE_IDS]),
            "proxy_id": proxy_id(),
            "scheduler_link": SchedulerLinkState.objects.status_of(proxy_id()),
        })

    @action(detail=False, methods=["get"])
    def instance_resources(self, request):
        now = clock.now()
        instances = Instance.objects.in_view(query_bool(request, "include_dead", True), now)
        return Response({"instances": resource_rows(instances, now)})

    @action(detail=False, methods=["get"])
    def instance_loads(self, request):
        now = clock.now()
        instances = Instance.objects.in_view(query_bool(request, "include_dead", True), now)
        return Response({
            "ok": True,
            "ttl_s": Instance.ttl_s(),
            "generated_at": now,
            "metric_source": {"inflight": LOAD_SOURCE, "qps_1m": LOAD_SOURCE, "queue_depth": UNAVAILABLE},
            "instances": load_rows(instances, now),
        })

    @action(detail=False, methods=["get"])
    def pool_resource(self, request):
        return Response({"ok": True, "pool_resource": pool_resource()})

    @action(detail=False, methods=["get"], url_path="pool_resource/history")
    def pool_resource_history(self, request):
        """The pool's summary over a range, from the recorder's PoolResource rows (SPEC 9)."""
        return self.series_response(POOL, {"proxy_id": proxy_id()})

    @action(detail=False, methods=["get"])
    def pool_resource_sources(self, request):
        summary = pool_resource()
        return Response({
            "ok": True,
            "metric_source": summary["metric_source"],
            "metric_quality": summary["metric_quality"],
            "null_semantics": NULL_SEMANTICS,
        })

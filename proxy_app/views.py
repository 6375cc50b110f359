"""Proxy API (SPEC 3): parse, call one domain operation, serialise."""

from rest_framework.decorators import action
from rest_framework.response import Response

from controlplane import clock, liveness
from controlplane.api import ControlPlaneViewSet, ok_response, query_bool
from proxy_app import pool
from proxy_app.link import link_status
from proxy_app.managers import IngestResult
from proxy_app.models import Instance
from proxy_app.serializers import (
    HeartbeatSerializer,
    InstanceIdSerializer,
    RegisterSerializer,
    SnapshotSerializer,
    instance_row,
    resource_dict,
)

UNKNOWN_INSTANCE = {"ok": False, "error": "unknown_instance"}
NULL_SEMANTICS = "0 means measured zero; null means unavailable, not wired, or unknown"


def instances_in_view(include_dead, now):
    queryset = Instance.objects.select_related("resource")
    if not include_dead:
        queryset = queryset.filter(last_seen_at__gte=now - pool.ttl_s())
    return queryset


class InstanceViewSet(ControlPlaneViewSet):
    """Instances register, heartbeat, report snapshots and leave."""

    @action(detail=False, methods=["post"])
    def register(self, request):
        data = self.validated(RegisterSerializer)
        instance = Instance.objects.register(now=clock.now(), **data)
        return Response({
            "instance_id": instance.instance_id,
            "heartbeat_interval_s": pool.heartbeat_interval_s(),
            "ttl_s": pool.ttl_s(),
        })

    @action(detail=False, methods=["post"])
    def heartbeat(self, request):
        data = self.validated(HeartbeatSerializer)
        load = {name: data[name] for name in HeartbeatSerializer.LOAD_FIELDS if name in data}
        if not Instance.objects.touch(data["instance_id"], clock.now(), "heartbeat", **load):
            return Response(UNKNOWN_INSTANCE)
        return ok_response()

    @action(detail=False, methods=["post"], url_path="resource_snapshot")
    def resource_snapshot(self, request):
        data = self.validated(SnapshotSerializer)
        result = Instance.objects.ingest_snapshot(
            data["instance_id"], data["snapshot"], data["metadata"], clock.now()
        )
        if result is IngestResult.UNKNOWN:
            return Response(UNKNOWN_INSTANCE)
        if result is IngestResult.STALE:
            return Response({"ok": True, "stale": True})
        return ok_response()

    @action(detail=False, methods=["post"])
    def unregister(self, request):
        data = self.validated(InstanceIdSerializer)
        return Response({"ok": Instance.objects.unregister(data["instance_id"], clock.now())})

    @action(detail=False, methods=["get"], url_path="list")
    def list_instances(self, request):
        include_dead = query_bool(request, "include_dead", False)
        now = clock.now()
        queryset = instances_in_view(include_dead, now)
        context = {"now": now, "ttl_s": pool.ttl_s(), "heartbeat_interval_s": pool.heartbeat_interval_s()}
        return self.rows_response(queryset, lambda i: instance_row(i, **context))


class PoolDebugViewSet(ControlPlaneViewSet):
    """Read-only views of the pool for operators and the scheduler link."""

    @action(detail=False, methods=["get"])
    def status(self, request):
        now = clock.now()
        ttl = pool.ttl_s()
        total = Instance.objects.count()
        alive = Instance.objects.filter(last_seen_at__gte=now - ttl).count()
        body = {
            "ok": True,
            "ttl_s": ttl,
            "alive_instances": alive,
            "total_instances": total,
            "expired_instances": total - alive,
            "sample_ids": list(Instance.objects.values_list("instance_id", flat=True)[:10]),
            "proxy_id": pool.proxy_id(),
        }
        body.update(self.extra_status())
        return Response(body)

    def extra_status(self):
        """The scheduler link's last outcome (it runs in its own process)."""
        return {"scheduler_link": link_status()}

    @action(detail=False, methods=["get"])
    def instance_resources(self, request):
        now = clock.now()
        rows = [
            {
                "instance_id": i.instance_id,
                "host": i.host,
                "port": i.port,
                "last_seen_at": i.last_seen_at,
                "is_alive": liveness.is_alive(i.last_seen_at, now, pool.ttl_s()),
                "resource": resource_dict(i, include_raw=False),
            }
            for i in instances_in_view(query_bool(request, "include_dead", True), now)
        ]
        return Response({"instances": rows})

    @action(detail=False, methods=["get"])
    def instance_loads(self, request):
        now = clock.now()
        ttl = pool.ttl_s()
        queryset = Instance.objects.all()
        if not query_bool(request, "include_dead", True):
            queryset = queryset.filter(last_seen_at__gte=now - ttl)
        rows = [
            {
                "instance_id": instance_id,
                "is_alive": liveness.is_alive(seen, now, ttl),
                "inflight": inflight,
                "qps_1m": qps,
                "gpu_util": gpu_util,
                "last_seen_at": seen,
            }
            for instance_id, seen, inflight, qps, gpu_util in queryset.values_list(
                "instance_id", "last_seen_at", "inflight", "qps_1m", "gpu_util"
            )
        ]
        return Response({
            "ok": True,
            "ttl_s": ttl,
            "generated_at": now,
            "metric_source": {"inflight": "instance_heartbeat", "qps_1m": "instance_heartbeat"},
            "instances": rows,
        })

    @action(detail=False, methods=["get"])
    def pool_resource(self, request):
        return Response({"ok": True, "pool_resource": pool.pool_resource()})

    @action(detail=False, methods=["get"])
    def pool_resource_sources(self, request):
        summary = pool.pool_resource()
        return Response({
            "ok": True,
            "metric_source": summary["metric_source"],
            "metric_quality": summary["metric_quality"],
            "null_semantics": NULL_SEMANTICS,
        })

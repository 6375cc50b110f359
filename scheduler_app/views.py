"""Scheduler API (SPEC 6): parse, call one domain operation, serialise."""

from rest_framework import status
from rest_framework.decorators import action
from rest_framework.response import Response

from controlplane import clock, liveness
from controlplane.api import ControlPlaneViewSet, ok_response, query_bool
from scheduler_app import fleet
from scheduler_app.models import PoolResourceSample, Proxy
from scheduler_app.serializers import (
    HeartbeatSerializer,
    HistoryQuerySerializer,
    ProxyIdSerializer,
    RegisterSerializer,
    proxy_row,
    sample_row,
)

# The original's FastAPI HTTPException body; its proxies re-register on it.
NOT_REGISTERED = {"detail": "proxy_id not registered"}


def proxies_in_view(include_dead, now):
    """Proxies newest-seen first; without ``include_dead`` only those within the TTL."""
    queryset = Proxy.objects.order_by("-last_seen_at", "proxy_id")
    if not include_dead:
        queryset = queryset.filter(last_seen_at__gte=now - fleet.ttl_s())
    return queryset


class ProxyViewSet(ControlPlaneViewSet):
    """Proxies register, heartbeat with their pool summary, and leave."""

    @action(detail=False, methods=["post"])
    def register(self, request):
        data = self.validated(RegisterSerializer)
        proxy = Proxy.objects.register(now=clock.now(), **data)
        return Response({
            "proxy_id": proxy.proxy_id,
            "heartbeat_interval_s": fleet.heartbeat_interval_wire(),
            "ttl_s": fleet.ttl_s(),
        })

    @action(detail=False, methods=["post"])
    def heartbeat(self, request):
        data = self.validated(HeartbeatSerializer)
        load = {name: data[name] for name in HeartbeatSerializer.LOAD_FIELDS if name in data}
        known = Proxy.objects.heartbeat(
            data["proxy_id"], clock.now(), load=load,
            meta_patch=data["meta_patch"], pool_resource=data["pool_resource"],
        )
        if not known:
            return Response(NOT_REGISTERED, status=status.HTTP_404_NOT_FOUND)
        return ok_response()

    @action(detail=False, methods=["post"])
    def unregister(self, request):
        data = self.validated(ProxyIdSerializer)
        Proxy.objects.unregister(data["proxy_id"], clock.now())
        return ok_response()

    @action(detail=False, methods=["get"], url_path="list")
    def list_proxies(self, request):
        include_dead = query_bool(request, "include_dead", False)
        now = clock.now()
        queryset = proxies_in_view(include_dead, now)
        context = {"now": now, "ttl_s": fleet.ttl_s(), "heartbeat_interval_s": fleet.heartbeat_interval_s()}
        return self.rows_response(queryset, lambda p: proxy_row(p, **context))


class FleetDebugViewSet(ControlPlaneViewSet):
    """Read-only views of the fleet's pool summaries."""

    @action(detail=False, methods=["get"])
    def proxy_pool_resources(self, request):
        now = clock.now()
        queryset = proxies_in_view(query_bool(request, "include_dead", True), now)
        rows = [
            {
                "proxy_id": proxy_id,
                "is_alive": liveness.is_alive(seen, now, fleet.ttl_s()),
                "last_seen_at": seen,
                "pool_resource_reported_at": reported_at,
                "pool_resource": summary,
            }
            for proxy_id, seen, reported_at, summary in queryset.values_list(
                "proxy_id", "last_seen_at", "pool_resource_reported_at", "pool_resource"
            )
        ]
        return Response({"ok": True, "proxies": rows})

    @action(detail=False, methods=["get"])
    def proxy_pool_history(self, request):
        query = HistoryQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        include_summary = query_bool(request, "include_summary", False)
        samples = PoolResourceSample.objects.recent(
            proxy_id=params.get("proxy_id"), since=params.get("since"), limit=params["limit"]
        )
        return Response({
            "ok": True,
            "proxy_id": params.get("proxy_id"),
            "since": params.get("since"),
            "limit": params["limit"],
            "samples": [sample_row(s, include_summary) for s in samples],
        })

"""Scheduler API (SPEC 6): parse, call one domain operation, serialise."""

from rest_framework import status
from rest_framework.decorators import action
from rest_framework.response import Response

from controlplane import clock
from controlplane.viewsets import ControlPlaneViewSet, ok_response, query_bool
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


def proxies_in_view(request, include_dead_default, now):
    """Proxies newest-seen first (SPEC 6); without ``include_dead`` only the alive ones."""
    include_dead = query_bool(request, "include_dead", include_dead_default)
    return Proxy.objects.order_by("-last_seen_at", "proxy_id").in_view(include_dead, now)


class ProxyViewSet(ControlPlaneViewSet):
    """Proxies register, heartbeat with their pool summary, and leave."""

    @action(detail=False, methods=["post"])
    def register(self, request):
        data = self.validated(RegisterSerializer)
        proxy = Proxy.objects.register(now=clock.now(), **data)
        return Response({
            "proxy_id": proxy.proxy_id,
            "heartbeat_interval_s": Proxy.heartbeat_interval_wire(),
            "ttl_s": Proxy.ttl_s(),
        })

    @action(detail=False, methods=["post"])
    def heartbeat(self, request):
        data = self.validated(HeartbeatSerializer)
        load = HeartbeatSerializer.load(data)
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
        now = clock.now()
        return self.rows_response(proxies_in_view(request, False, now), lambda proxy: proxy_row(proxy, now))


class FleetDebugViewSet(ControlPlaneViewSet):
    """Read-only views of the fleet's pool summaries."""

    @action(detail=False, methods=["get"])
    def proxy_pool_resources(self, request):
        now = clock.now()
        proxies = proxies_in_view(request, True, now).only(
            "proxy_id", "last_seen_at", "pool_resource_reported_at", "pool_resource"
        )
        rows = [
            {
                "proxy_id": proxy.proxy_id,
                "is_alive": proxy.is_alive(now),
                "last_seen_at": proxy.last_seen_at,
                "pool_resource_reported_at": proxy.pool_resource_reported_at,
                "pool_resource": proxy.pool_resource,
            }
            for proxy in proxies
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

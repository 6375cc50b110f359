"""Scheduler API (SPEC 6): parse, call one domain operation, serialise."""

from rest_framework import exceptions, status
from rest_framework.decorators import action
from rest_framework.response import Response

from controlplane import clock
from controlplane.api.hot_path import ok_response
from controlplane.api.rows import answers_of
from controlplane.api.viewsets import ControlPlaneViewSet, query_bool, query_id
from scheduler_app.history import PROXY_POOLS
from scheduler_app.models import Proxy
from scheduler_app.openapi import (
    PROXY_HISTORY,
    ProxyNotRegistered,
    ProxyPoolResources,
    ProxyRegistered,
    fleet_debug_schema,
    proxy_schema,
)
from scheduler_app.serializers import (
    POOL_RESOURCE_ROW,
    HeartbeatSerializer,
    ProxyIdSerializer,
    RegisterSerializer,
    proxy_rows,
)

# The answers, built from the serializers the schema publishes (``controlplane.api.rows``).
REGISTERED, HISTORY, POOL_RESOURCES = answers_of(ProxyRegistered, PROXY_HISTORY, ProxyPoolResources)
# The original's FastAPI HTTPException body; its proxies re-register on it.
NOT_REGISTERED = answers_of(ProxyNotRegistered)[0]()


def proxies_in_view(request, include_dead_default, now):
    """Proxies newest-seen first (SPEC 6); without ``include_dead`` only the alive ones."""
    include_dead = query_bool(request, "include_dead", include_dead_default)
    return Proxy.objects.order_by("-last_seen_at", "proxy_id").in_view(include_dead, now)


@proxy_schema
class ProxyViewSet(ControlPlaneViewSet):
    """Proxies register, heartbeat with their pool summary, and leave."""

    write_scope = "proxy"

    @action(detail=False, methods=["post"])
    def register(self, request):
        data = self.validated(RegisterSerializer)
        proxy = Proxy.objects.register(now=clock.now(), **data)
        return Response(REGISTERED(proxy_id=proxy.proxy_id, heartbeat_interval_s=Proxy.heartbeat_interval_wire(),
                                   ttl_s=Proxy.ttl_s()))

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
        return self.rows_response(proxies_in_view(request, False, now), lambda page: proxy_rows(page, now))

    @action(detail=False, methods=["get"])
    def history(self, request):
        """A proxy's pool summaries over a range (SPEC 9); 404 for a proxy never seen."""
        proxy_id = query_id(request, "proxy_id")
        if not Proxy.objects.filter(pk=proxy_id).exists() and not PROXY_POOLS.has(proxy_id):
            raise exceptions.NotFound({"proxy_id": ["Unknown proxy."]})
        return self.series_response(PROXY_POOLS, HISTORY, proxy_id, proxy_id=proxy_id)


@fleet_debug_schema
class FleetDebugViewSet(ControlPlaneViewSet):
    """Read-only views of the fleet's pool summaries."""

    @action(detail=False, methods=["get"])
    def proxy_pool_resources(self, request):
        now = clock.now()
        rows = proxy_rows(proxies_in_view(request, True, now), now, POOL_RESOURCE_ROW)
        return Response(POOL_RESOURCES(proxies=rows))

"""``/debug/*`` (SPEC 3, 5): read-only views of the pool for operators, the original's UI and the scheduler link.

Each answer is built from the serializer the schema publishes for it (``proxy_app.api.openapi.answers``,
``RowShape.answer_builder`` of ``controlplane.api.rows``): the views give the values, the declarations the keys.
"""

from rest_framework.decorators import action
from rest_framework.response import Response

from controlplane import clock
from controlplane.api.rows import answers_of
from controlplane.api.viewsets import ControlPlaneViewSet, query_bool
from proxy_app.api.listing import load_rows, resource_rows
from proxy_app.api.openapi import pool_debug_schema
from proxy_app.api.openapi.answers import (
    POOL_HISTORY,
    InstanceLoads,
    InstanceResources,
    PoolResourceAnswer,
    PoolResourceSources,
    ProxyStatus,
)
from proxy_app.models import Instance
from proxy_app.ops.history import POOL
from proxy_app.pool.answers import link_status
from proxy_app.pool.summary import pool_resource, proxy_id

NULL_SEMANTICS = "0 means measured zero; null means unavailable, not wired, or unknown"
# How many alive instance ids /debug/status shows (the original CLI's sample).
SAMPLE_IDS = 10
STATUS, RESOURCES, LOADS, POOL_RESOURCE, SOURCES, HISTORY = answers_of(
    ProxyStatus, InstanceResources, InstanceLoads, PoolResourceAnswer, PoolResourceSources, POOL_HISTORY)


@pool_debug_schema
class PoolDebugViewSet(ControlPlaneViewSet):
    """Read-only views of the pool for operators and the scheduler link."""

    @action(detail=False, methods=["get"])
    def status(self, request):
        total, alive = Instance.objects.count(), Instance.objects.alive(clock.now())
        this_proxy = proxy_id()
        return Response(STATUS(
            ttl_s=Instance.ttl_s(), alive_instances=alive.count(), total_instances=total,
            sample_ids=list(alive.values_list("instance_id", flat=True)[:SAMPLE_IDS]), proxy_id=this_proxy,
            scheduler_link=link_status(this_proxy),
        ))

    @action(detail=False, methods=["get"])
    def instance_resources(self, request):
        now = clock.now()
        instances = Instance.objects.in_view(query_bool(request, "include_dead", True), now)
        return Response(RESOURCES(instances=resource_rows(instances, now)))

    @action(detail=False, methods=["get"])
    def instance_loads(self, request):
        now = clock.now()
        instances = Instance.objects.in_view(query_bool(request, "include_dead", True), now)
        return Response(LOADS(ttl_s=Instance.ttl_s(), now=now, instances=load_rows(instances, now)))

    @action(detail=False, methods=["get"])
    def pool_resource(self, request):
        return Response(POOL_RESOURCE(pool_resource=pool_resource()))

    @action(detail=False, methods=["get"], url_path="pool_resource/history")
    def pool_resource_history(self, request):
        """The pool's summary over a range, from the recorder's PoolResource rows (SPEC 9)."""
        return self.series_response(POOL, HISTORY, proxy_id=proxy_id())

    @action(detail=False, methods=["get"])
    def pool_resource_sources(self, request):
        summary = pool_resource()
        return Response(SOURCES(metric_source=summary["metric_source"], metric_quality=summary["metric_quality"],
                                null_semantics=NULL_SEMANTICS))

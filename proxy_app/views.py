"""Proxy API (SPEC 3): parse, call one domain operation, serialise."""

import orjson
from django.http import HttpResponse
from rest_framework import exceptions
from rest_framework.decorators import action
from rest_framework.response import Response

from controlplane import clock
from controlplane.api.hot_path import HotWriteView, json_response, ok_response
from controlplane.api.serializers import HeartbeatSerializerBase
from controlplane.api.viewsets import ControlPlaneViewSet, query_bool, query_id
from proxy_app import pool
from proxy_app.history import INSTANCES, POOL
from proxy_app.ingest import IngestResult, ingest_snapshot
from proxy_app.listing import instance_list_json, resource_rows
from proxy_app.managers import Heartbeat
from proxy_app.models import Instance, SchedulerLinkState
from proxy_app.openapi import (
    heartbeat_schema,
    instance_schema,
    pool_debug_schema,
    snapshot_schema,
    unregister_schema,
)
from proxy_app.serializers import InstanceIdSerializer, RegisterSerializer, heartbeat_report, snapshot_report

UNKNOWN_INSTANCE = {"ok": False, "error": "unknown_instance"}
NULL_SEMANTICS = "0 means measured zero; null means unavailable, not wired, or unknown"
# How many alive instance ids /debug/status shows (the original CLI's sample).
SAMPLE_IDS = 10


class SnapshotView(HotWriteView):
    """``POST /v1/instance/resource_snapshot``: most of a Proxy's traffic, so a ``HotWriteView``."""

    write_scope = "instance"

    @snapshot_schema
    def post(self, request):
        return super().post(request)

    def work(self, data, grant):
        data = snapshot_report(data)
        result = ingest_snapshot(data["instance_id"], data["snapshot"], data["metadata"], clock.now())
        if result is IngestResult.UNKNOWN:
            return json_response(UNKNOWN_INSTANCE)
        if result is IngestResult.STALE:
            return json_response({"ok": True, "stale": True})
        return ok_response()


class HeartbeatView(HotWriteView):
    """``POST /v1/instance/heartbeat``: every instance's second write, so a ``HotWriteView`` too."""

    write_scope = "instance"

    @heartbeat_schema
    def post(self, request):
        return super().post(request)

    def work(self, data, grant):
        data = heartbeat_report(data)
        outcome, stored = Instance.objects.heartbeat(
            data["instance_id"], clock.now(), HeartbeatSerializerBase.load(data),
            capabilities=data.get("capabilities"), reported_fingerprint=data.get("capability_fingerprint"),
        )
        if outcome is Heartbeat.OK:
            return ok_response()
        if outcome is Heartbeat.UNKNOWN_INSTANCE:
            return json_response(UNKNOWN_INSTANCE)
        # The original's answer: the instance re-sends its capabilities.
        return json_response({
            "ok": False,
            "error": outcome.value,
            "requires_capabilities": True,
            "expected_fingerprint": stored,
            "reported_fingerprint": data["capability_fingerprint"],
        })


class UnregisterView(HotWriteView):
    """``POST /v1/instance/unregister``: a whole pool may leave at once (a deploy), so a ``HotWriteView``."""

    write_scope = "instance"

    @unregister_schema
    def post(self, request):
        return super().post(request)

    def work(self, data, grant):
        serializer = InstanceIdSerializer(data=data)
        serializer.is_valid(raise_exception=True)
        return json_response({"ok": Instance.objects.unregister(serializer.validated_data["instance_id"], clock.now())})


@instance_schema
class InstanceViewSet(ControlPlaneViewSet):
    """Instances register and are listed (their heartbeats, snapshots and unregisters: the views above)."""

    write_scope = "instance"

    @action(detail=False, methods=["post"])
    def register(self, request):
        data = self.validated(RegisterSerializer)
        instance = Instance.objects.register(now=clock.now(), **data)
        return Response({
            "instance_id": instance.instance_id,
            "heartbeat_interval_s": Instance.heartbeat_interval_s(),
            "ttl_s": Instance.ttl_s(),
            "capability_fingerprint": instance.capability_fingerprint,
        })

    @action(detail=False, methods=["get"], url_path="list")
    def list_instances(self, request):
        now = clock.now()
        instances = Instance.objects.in_view(query_bool(request, "include_dead", False), now)
        if not request.query_params.keys() & {"limit", "offset"}:
            # The bare array as encoded: DRF's renderer would copy its 31 MB (10,000 instances) once more.
            return HttpResponse(instance_list_json(instances, now), content_type="application/json")
        return self.rows_response(instances, lambda page: orjson.Fragment(instance_list_json(page, now)))

    @action(detail=False, methods=["get"])
    def history(self, request):
        """An instance's figures over a range (SPEC 9); 404 for an instance never seen."""
        instance_id = query_id(request, "instance_id")
        if not Instance.objects.filter(pk=instance_id).exists() and not INSTANCES.has(instance_id):
            raise exceptions.NotFound({"instance_id": ["Unknown instance."]})
        return self.series_response(INSTANCES, {"instance_id": instance_id}, instance_id)


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
            "proxy_id": pool.proxy_id(),
            "scheduler_link": SchedulerLinkState.objects.status_of(pool.proxy_id()),
        })

    @action(detail=False, methods=["get"])
    def instance_resources(self, request):
        now = clock.now()
        instances = Instance.objects.in_view(query_bool(request, "include_dead", True), now)
        return Response({"instances": resource_rows(instances, now)})

    @action(detail=False, methods=["get"])
    def instance_loads(self, request):
        now = clock.now()
        instances = Instance.objects.in_view(query_bool(request, "include_dead", True), now).only(
            "instance_id", "last_seen_at", "inflight", "qps_1m", "gpu_util"
        )
        rows = [
            {
                "instance_id": instance.instance_id,
                "is_alive": instance.is_alive(now),
                "inflight": instance.inflight,
                "qps_1m": instance.qps_1m,
                "gpu_util": instance.gpu_util,
                "last_seen_at": instance.last_seen_at,
            }
            for instance in instances
        ]
        return Response({
            "ok": True,
            "ttl_s": Instance.ttl_s(),
            "generated_at": now,
            "metric_source": {"inflight": "instance_heartbeat", "qps_1m": "instance_heartbeat"},
            "instances": rows,
        })

    @action(detail=False, methods=["get"])
    def pool_resource(self, request):
        return Response({"ok": True, "pool_resource": pool.pool_resource()})

    @action(detail=False, methods=["get"], url_path="pool_resource/history")
    def pool_resource_history(self, request):
        """The pool's summary over a range, from the recorder's PoolResource rows (SPEC 9)."""
        return self.series_response(POOL, {"proxy_id": pool.proxy_id()})

    @action(detail=False, methods=["get"])
    def pool_resource_sources(self, request):
        summary = pool.pool_resource()
        return Response({
            "ok": True,
            "metric_source": summary["metric_source"],
            "metric_quality": summary["metric_quality"],
            "null_semantics": NULL_SEMANTICS,
        })

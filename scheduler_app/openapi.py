"""The Scheduler API (SPEC 6, 9) as OpenAPI: request bodies, answers, compat quirks.

``ProxyViewSet`` and ``FleetDebugViewSet`` wear ``proxy_schema`` and
``fleet_debug_schema``; the shared parts are in ``controlplane.api.schema``.
"""

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema_view
from rest_framework import serializers

from controlplane.api.rows import reads
from controlplane.api.schema.answers import (
    OkBody,
    history_answer,
)
from controlplane.api.schema.operations import (
    entry_history_operation,
    include_dead,
    list_operation,
    read_operation,
    write_operation,
)
from controlplane.api.schema.parts import Const
from controlplane.api.schema.placement import answer_fields, placement_operation
from scheduler_app.models import PoolResourceSample
from scheduler_app.serializers import (
    HeartbeatSerializer,
    PoolPlacementSerializer,
    ProxyIdSerializer,
    ProxyPoolResourceRow,
    ProxyRow,
    RegisterSerializer,
)

PROXIES = ["proxies"]
FLEET = ["fleet (debug)"]

# --- request bodies --------------------------------------------------------------------------


class ProxyRegister(RegisterSerializer):
    """Register (or re-register) a proxy (SPEC 6). Unknown fields are ignored. A re-register replaces
    every field but keeps registered_at; without `pool_resource` (or with null) the stored one is kept."""


class ProxyHeartbeat(HeartbeatSerializer):
    """A heartbeat: the load fields present are stored (null: unknown now), absent ones kept;
    `meta_patch` is merged into meta; `pool_resource` replaces the stored one (absent or null keeps it)."""


class ProxyId(ProxyIdSerializer):
    """The proxy to remove."""


EXAMPLE_PROXY = "pool-a"
POOL_RESOURCE_EXAMPLE = {
    "schema_version": 1, "proxy_id": EXAMPLE_PROXY, "generated_at": 1767225600.0, "ttl_s": 30,
    "instances": {"total": 2, "alive": 2, "stale": 0, "with_resource": 2, "missing_resource": 0,
                  "accepting": 2, "degraded": 0, "rejecting": 0},
    "utilization": {"cpu_avg": 20.0, "gpu_util_avg": 55.0, "memory_used_ratio": 0.25, "gpu_mem_used_ratio": 0.8},
    "pool_admission_state": "accepting",
}
REGISTER_EXAMPLE = OpenApiExample("A proxy of one pool", request_only=True, value={
    "proxy_id": EXAMPLE_PROXY, "host": "10.0.0.2", "port": 8002, "max_capacity": 64, "instance_count": 2,
    "kv_mem_per_instance_gb": 40.0, "pool_resource": POOL_RESOURCE_EXAMPLE,
})
HEARTBEAT_EXAMPLE = OpenApiExample("With a fresh summary", request_only=True, value={
    "proxy_id": EXAMPLE_PROXY, "inflight": 3, "qps_1m": 2.5, "meta_patch": {"version": "1"},
    "pool_resource": POOL_RESOURCE_EXAMPLE,
})
UNREGISTER_EXAMPLE = OpenApiExample("Leave", request_only=True, value={"proxy_id": EXAMPLE_PROXY})


# --- answers ---------------------------------------------------------------------------------


class ProxyRegistered(serializers.Serializer):
    proxy_id = serializers.CharField(help_text="As sent, or `pxy_` + 12 hex digits when sent null or \"\".")
    heartbeat_interval_s = serializers.FloatField(help_text=(
        "FLEETWATCH_PROXY_HEARTBEAT_S (5): an integer when whole, as the original answered."
    ))
    ttl_s = serializers.IntegerField()


class ProxyNotRegistered(serializers.Serializer):
    """compat: the original's FastAPI error body; the proxy re-registers on it."""

    detail = Const("proxy_id not registered")


class ProxyPoolResources(serializers.Serializer):
    ok = Const(True)
    proxies = reads(ProxyPoolResourceRow(many=True), "proxies")


PROXY_HISTORY = history_answer("ProxyHistory", "proxy_id", "ProxyPoolPoint", PoolResourceSample)

# --- the operations --------------------------------------------------------------------------

proxy_schema = extend_schema_view(
    register=write_operation(
        "proxy_register", "Register a proxy", "Registers a proxy, or replaces a known one's fields.",
        ProxyRegister, {200: ProxyRegistered}, "proxy", tags=PROXIES, examples=[REGISTER_EXAMPLE],
    ),
    heartbeat=write_operation(
        "proxy_heartbeat", "Heartbeat of a proxy", (
            "Refreshes last_seen_at, the load fields sent, meta and the pool summary. compat: an unknown "
            "proxy_id is a **404** `{\"detail\": \"proxy_id not registered\"}` (the original's body, not the "
            "error envelope); the proxy then re-registers."
        ), ProxyHeartbeat,
        {200: OkBody, 404: OpenApiResponse(ProxyNotRegistered, description="Unknown proxy_id (compat body).")},
        "proxy", tags=PROXIES,
        examples=[HEARTBEAT_EXAMPLE, OpenApiExample("Unknown proxy (compat)", {"detail": "proxy_id not registered"},
                                                    response_only=True, status_codes=["404"])],
    ),
    unregister=write_operation(
        "proxy_unregister", "Unregister a proxy",
        "Deletes the proxy (if known) and records a last status change to `unregistered`; always `{\"ok\": true}`.",
        ProxyId, {200: OkBody}, "proxy", tags=PROXIES, examples=[UNREGISTER_EXAMPLE],
    ),
    list_proxies=list_operation(
        "proxy_list", "List proxies", "proxies", "newest seen first", ProxyRow, "Proxy", tags=PROXIES,
    ),
    history=entry_history_operation(
        "proxy_history", "A proxy's pool history",
        "The figures of a proxy's stored pool summaries over a range, oldest first (SPEC 9).",
        PROXY_HISTORY, "proxy_id", "proxy", EXAMPLE_PROXY, tags=PROXIES,
    ),
)

fleet_debug_schema = extend_schema_view(
    proxy_pool_resources=read_operation(
        "debug_proxy_pool_resources", "Every proxy's pool summary",
        "The latest pool_resource each proxy sent, with when it arrived.", ProxyPoolResources,
        parameters=[include_dead(True)], tags=FLEET,
    ),
)


# --- placement (SPEC 14.3) -------------------------------------------------------------------


def ranked(field, attribute):
    """``field``, read from the ranked pool (``RankedPool``; ``candidate.…``: what is known of the proxy)."""
    return reads(field, f"ranked.{attribute}")


class PoolPlacementCandidate(serializers.Serializer):
    proxy_id = ranked(serializers.CharField(), "candidate.proxy_id")
    host = ranked(serializers.CharField(), "candidate.host")
    port = ranked(serializers.IntegerField(), "candidate.port")
    saturation = ranked(serializers.FloatField(allow_null=True, help_text="The pool summary's engine.saturation."),
                        "candidate.saturation")
    pool_admission_state = ranked(serializers.CharField(allow_null=True), "candidate.pool_admission_state")
    summary_age_s = ranked(serializers.FloatField(allow_null=True, help_text="Age of the proxy's latest pool "
                                                                             "summary."), "summary_age_s")
    reasons = reads(serializers.ListField(child=serializers.CharField()), "ranked.reasons", using=list)


PoolPlacement = type("PoolPlacement", (serializers.Serializer,), {
    "__doc__": "Which pool of the fleet a request should go to (SPEC 14.3).",
    **answer_fields(PoolPlacementCandidate, "At most `count`; none when shedding or unavailable."),
})

placement_schema = placement_operation(
    "proxy_placement", "Which pool should this request go to", (
        "Ranks the alive proxies whose pool is not rejecting and, with `model`, whose pool summary lists it, "
        "by their pool's engine saturation (lowest first; pools without one after), then by alive instances. "
        "The header names the proxies' host:port."
    ), PoolPlacementSerializer, PoolPlacement, ["placement"],
)

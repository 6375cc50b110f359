"""The Proxy API (SPEC 3, 3.1, 3.2, 5, 9) as OpenAPI: the operations; request bodies in
``bodies``, answers in ``answers``.

``InstanceViewSet`` and ``PoolDebugViewSet`` wear ``instance_schema`` and
``pool_debug_schema``; the shared parts (errors, auth, paging) are in
``controlplane.api.schema``. Where the code is the contract (the capability
validator, the resource columns) the schema is read from it, so the two
cannot drift apart.
"""

from drf_spectacular.utils import OpenApiExample, extend_schema_view

from controlplane.api.schema.operations import (
    RANGE,
    entry_history_operation,
    include_dead,
    list_operation,
    read_operation,
    write_operation,
)
from proxy_app.api.openapi.answers import (
    HEARTBEAT_ANSWER,
    INSTANCE_HISTORY,
    POOL_HISTORY,
    SNAPSHOT_ANSWER,
    InstanceLoads,
    InstanceRegistered,
    InstanceResources,
    PoolResourceAnswer,
    PoolResourceSources,
    ProxyStatus,
    Unregistered,
)
from proxy_app.api.openapi.bodies import (
    EXAMPLE_INSTANCE,
    HEARTBEAT_EXAMPLE,
    REGISTER_EXAMPLE,
    SNAPSHOT_EXAMPLE,
    UNREGISTER_EXAMPLE,
    InstanceHeartbeat,
    InstanceId,
    InstanceRegister,
    Snapshot,
)
from proxy_app.api.openapi.rows import InstanceRow

INSTANCES = ["instances"]
POOL = ["pool (debug)"]
UNKNOWN_INSTANCE_HELP = (
    "compat: an instance this Proxy does not know (never registered, unregistered, or expired) is "
    "answered **200** `{\"ok\": false, \"error\": \"unknown_instance\"}`; the agent then re-registers."
)

# --- the operations --------------------------------------------------------------------------

# The snapshot report and the heartbeat are served by views of their own (HotWriteViews of
# proxy_app.api.views: the hot lane serves them, controlplane/ops/hot_lane.py).
snapshot_schema = write_operation(
    "instance_resource_snapshot", "Report a resource snapshot", (
        "Stores the latest snapshot of an instance and refreshes its last_seen_at. "
        + UNKNOWN_INSTANCE_HELP + " A report whose `metadata.report_seq` is lower than the stored "
        "one is answered `{\"ok\": true, \"stale\": true}` and not stored."
    ), Snapshot, {200: SNAPSHOT_ANSWER}, "instance", tags=INSTANCES,
    examples=[
        SNAPSHOT_EXAMPLE,
        OpenApiExample("Stored", {"ok": True}, response_only=True),
        OpenApiExample("Late report, not stored", {"ok": True, "stale": True}, response_only=True),
        OpenApiExample("Unknown instance (compat)", {"ok": False, "error": "unknown_instance"}, response_only=True),
    ],
)

# The heartbeat too (proxy_app.api.views.HeartbeatView).
heartbeat_schema = write_operation(
    "instance_heartbeat", "Heartbeat of an instance", (
        "Refreshes last_seen_at and the load fields sent. " + UNKNOWN_INSTANCE_HELP + " With "
        "`capabilities`, they replace the stored ones; with only a `capability_fingerprint` that is not "
        "the stored one, the answer asks for the capabilities (SPEC 3.2)."
    ), InstanceHeartbeat, {200: HEARTBEAT_ANSWER}, "instance", tags=INSTANCES,
    examples=[
        HEARTBEAT_EXAMPLE,
        OpenApiExample("Known", {"ok": True}, response_only=True),
        OpenApiExample("Unknown instance (compat)", {"ok": False, "error": "unknown_instance"}, response_only=True),
        OpenApiExample("Fingerprint mismatch", {
            "ok": False, "error": "capability_fingerprint_mismatch", "requires_capabilities": True,
            "expected_fingerprint": "sha256:" + "a" * 64, "reported_fingerprint": "sha256:" + "b" * 64,
        }, response_only=True),
    ],
)

# And the unregister (proxy_app.api.views.UnregisterView): a whole pool may leave at once.
unregister_schema = write_operation(
    "instance_unregister", "Unregister an instance",
    "Deletes the instance and records a last status change to `unregistered`.",
    InstanceId, {200: Unregistered}, "instance", tags=INSTANCES, examples=[UNREGISTER_EXAMPLE],
)


instance_schema = extend_schema_view(
    register=write_operation(
        "instance_register", "Register an instance", (
            "Re-register of a known id: host, port and weight replaced; endpoints and tags replaced only "
            "when non-empty; meta merged; capabilities replaced (absent or null clears them); "
            "registered_at, load and the latest resource kept."
        ), InstanceRegister, {200: InstanceRegistered}, "instance", tags=INSTANCES, examples=[REGISTER_EXAMPLE],
    ),
    list_instances=list_operation(
        "instance_list", "List instances", "instances", "by id", InstanceRow, "Instance", tags=INSTANCES,
    ),
    history=entry_history_operation(
        "instance_history", "An instance's history", "The instance's figures over a range, oldest first (SPEC 9).",
        INSTANCE_HISTORY, "instance_id", "instance", EXAMPLE_INSTANCE, tags=INSTANCES,
    ),
)

pool_debug_schema = extend_schema_view(
    status=read_operation(
        "debug_status", "The Proxy's status", "Counts of instances, a sample of alive ids, and the link's state.",
        ProxyStatus, tags=POOL,
    ),
    instance_resources=read_operation(
        "debug_instance_resources", "Every instance's resource", "SPEC 3.1 columns per instance, without the raw "
        "snapshot.", InstanceResources, parameters=[include_dead(True)], tags=POOL,
    ),
    instance_loads=read_operation(
        "debug_instance_loads", "Every instance's load", "The load fields from heartbeats.", InstanceLoads,
        parameters=[include_dead(True)], tags=POOL,
    ),
    pool_resource=read_operation(
        "debug_pool_resource", "The pool summary", "pool_resource (SPEC 5), computed now.", PoolResourceAnswer,
        tags=POOL,
    ),
    pool_resource_history=read_operation(
        "debug_pool_resource_history", "The pool summary's history",
        "The figures of this pool's summaries over a range, oldest first (SPEC 9).", POOL_HISTORY,
        parameters=[RANGE], tags=POOL,
    ),
    pool_resource_sources=read_operation(
        "debug_pool_resource_sources", "Where the summary's values come from",
        "pool_resource's metric_source and metric_quality, and what null means.", PoolResourceSources, tags=POOL,
    ),
)

"""The Proxy API (SPEC 3, 3.1, 3.2, 5, 9) as OpenAPI: request bodies, answers, compat quirks.

``InstanceViewSet`` and ``PoolDebugViewSet`` wear ``instance_schema`` and
``pool_debug_schema``; the shared parts (errors, auth, paging) are in
``controlplane.openapi``. Where the code is the contract (the capability
validator, the resource columns) the schema is read from it, so the two
cannot drift apart.
"""

from drf_spectacular.extensions import OpenApiSerializerExtension, OpenApiSerializerFieldExtension
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import serializers

from controlplane.admission import Admission
from controlplane.fields import JSONObjectField, ObjectOrNull, StrictCharField
from controlplane.models import NAME_LENGTH
from controlplane.openapi import (
    NOT_FOUND,
    PAGING,
    RANGE,
    Const,
    OkBody,
    RegisteredEntryRow,
    entry_id,
    history_answer,
    history_point,
    include_dead,
    nullable_integer,
    nullable_number,
    page_of,
    read_operation,
    write_operation,
)
from proxy_app import capabilities as caps
from proxy_app.aggregation import SCHEMA_VERSION
from proxy_app.models import InstanceResource, InstanceSample, PoolResource
from proxy_app.normalise import RESOURCE_FIELDS
from proxy_app.serializers import HeartbeatSerializer, InstanceIdSerializer, RegisterSerializer

INSTANCES = ["instances"]
POOL = ["pool (debug)"]
UNKNOWN_INSTANCE_HELP = (
    "compat: an instance this Proxy does not know (never registered, unregistered, or expired) is "
    "answered **200** `{\"ok\": false, \"error\": \"unknown_instance\"}`; the agent then re-registers."
)

# --- capabilities (SPEC 3.2), read from the validator itself ---------------------------------


def capability_schema(member, direction):
    """The JSON schema of one member of ``proxy_app.capabilities.CAPABILITY``.

    ``request``: what ``parse_capabilities`` accepts (unknown keys anywhere are a 400).
    ``response``: what ``full_view`` shows (every field present, absent ones null).
    """
    if isinstance(member, caps._Record):
        properties = {key: capability_schema(child, direction) for key, child in member.members.items()}
        schema = {"type": "object", "properties": properties, "nullable": True}
        required = list(properties) if direction == "response" else [
            key for key, child in member.members.items() if isinstance(child, caps._RequiredText)]
        if required:
            schema["required"] = required
        if direction == "request":
            schema["additionalProperties"] = False
        return schema
    if isinstance(member, caps._List):
        item = {**capability_schema(member.item, direction), "nullable": False}
        return {"type": "array", "items": item, "maxItems": caps.MAX_ADAPTERS, "nullable": True}
    if isinstance(member, caps._Features):
        text = {"type": "string", "maxLength": caps.MAX_TEXT}
        return {"type": "array", "items": text, "maxItems": caps.MAX_FEATURES, "nullable": True,
                "description": "Sorted and de-duplicated when stored; [] when absent."}
    if isinstance(member, caps._PositiveInt):
        return {"type": "integer", "minimum": 1, "maximum": 2**31 - 1, "nullable": True}
    if isinstance(member, caps._Object):
        return {"type": "object", "additionalProperties": {}, "nullable": True}
    if isinstance(member, caps._Text):
        return {"type": "string", "maxLength": caps.MAX_TEXT, "nullable": not isinstance(member, caps._RequiredText)}
    raise TypeError(f"no schema for {member!r}")


def capabilities_component(direction, description):
    schema = capability_schema(caps.CAPABILITY, direction)
    schema.pop("nullable")  # said by the field that holds it
    return {**schema, "description": description}


CAPABILITIES_REQUEST = capabilities_component("request", (
    "The original Instance's typed `InstanceCapability` (SPEC 3.2). Unknown keys anywhere in it are a "
    "400; `configuration` and `layout_parameters` are free-form. Stored in canonical form: defaults "
    "filled in (`schema_version` \"1\", `layout_parameters` {}, `supported_cache_features` []), null "
    "members dropped, features sorted and de-duplicated; the fingerprint is `sha256:` + the hex SHA-256 "
    "of that form as JSON with sorted keys, separators `,` `:` and UTF-8 text."
))
CAPABILITIES_VIEW = capabilities_component("response", (
    "The stored capabilities with every field present: defaults filled in, absent optionals null."
))


class CapabilitiesScheme(OpenApiSerializerFieldExtension):
    """``proxy_app.serializers.CapabilitiesField``: the typed object the request validates."""

    target_class = "proxy_app.serializers.CapabilitiesField"

    def get_name(self):
        return "Capabilities"

    def map_serializer_field(self, auto_schema, direction):
        return CAPABILITIES_REQUEST


@extend_schema_field({**CAPABILITIES_VIEW, "nullable": True}, component_name="CapabilitiesFullView")
class CapabilitiesFullView(serializers.Field):
    pass


# --- request bodies --------------------------------------------------------------------------


class InstanceRegister(RegisterSerializer):
    """Register (or re-register) an instance (SPEC 3). Unknown fields are ignored."""


class InstanceHeartbeat(HeartbeatSerializer):
    """A heartbeat: load fields present are stored (null: unknown now), absent ones kept.
    Send `capabilities` or `capability_fingerprint`, not both (a 400)."""


class InstanceHeartbeatScheme(OpenApiSerializerExtension):
    """The one rule across two fields: not both `capabilities` and `capability_fingerprint` non-null."""

    target_class = InstanceHeartbeat

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        # A null member is no type here (OpenAPI 3.0), so this is "not both sent as values".
        schema["not"] = {
            "required": ["capabilities", "capability_fingerprint"],
            "properties": {"capabilities": {"type": "object"}, "capability_fingerprint": {"type": "string"}},
        }
        return schema


class InstanceId(InstanceIdSerializer):
    """The instance to remove."""


def read(description):
    """A member the Proxy reads: any JSON is accepted, a value that is not a finite number is null."""
    return {"description": description}


def shape(description, **members):
    """Where the Proxy looks inside a member; no type, so any other JSON is accepted there too."""
    return {"description": description, "properties": members}


GPU_ROW = shape(
    "One GPU. Invalid when `utilization_sample_ok` is false or its quality is invalid, failed, error, "
    "command_error, parse_error or unsupported.",
    utilization_pct_avg=read("% (window average); else `utilization_pct`, `utilization_gpu_pct`, `gpu_util`, `util`."),
    utilization_pct=read("% (= the window average)."),
    utilization_pct_current=read("% now → gpu_util_current."),
    utilization_pct_max=read("% window maximum → gpu_util_max."),
    utilization_sample_ok=read("Boolean."),
    utilization_sample_quality=read("`ok`, or why not."),
    utilization_sample_count=read("Integer → gpu_sample_count (summed)."),
    utilization_sample_timestamp_ms=read("Integer epoch ms of the newest sample → gpu_sample_age_ms."),
    utilization_window_ms=read("Integer → gpu_sample_window_ms."),
    utilization_source=read("`nvml` → gpu_sample_source."),
    memory_used_mb=read("MiB → gpu_mem_used_mb (summed)."),
    memory_total_mb=read("MiB → gpu_mem_total_mb (summed)."),
)
RESOURCE_SNAPSHOT = shape(
    "The agent's `resource_snapshot_v1` (SPEC 2.2), stored as sent in `raw_resource` and normalised into the "
    "columns of SPEC 3.1. Any object is accepted: a value that is not a finite number reads as null, never 0, "
    "and a malformed part never rejects the report. The members below are the ones read.",
    schema_version=read("`resource_snapshot_v1`."),
    timestamp_ms=read("Integer epoch milliseconds of the sample → resource_ts_ms."),
    devices=shape(
        "The host's devices.",
        cpu=shape("CPU.", utilization_pct=read("% → cpu_util.")),
        memory=shape("Memory (MiB).", used_mb=read("→ memory_used_mb."), total_mb=read("→ memory_total_mb."),
                     free_mb=read("Available → memory_free_mb.")),
        network={"description": "Interfaces, the default route's first.", "items": shape(
            "An interface (the first is read).", rx_mbps=read("Mbit/s → network_rx_mbps."),
            tx_mbps=read("Mbit/s → network_tx_mbps."))},
        gpu={"description": "GPUs; [] is a host without GPUs (gpu_count 0), absent is unknown.", "items": GPU_ROW},
    ),
    capacity_hint=shape(
        "The agent's verdict.",
        memory_free_ratio=read("free / total → memory_free_ratio (else computed)."),
        admission_state=read("accepting, degraded or rejecting → admission_state (lower-cased)."),
    ),
)


@extend_schema_field({**RESOURCE_SNAPSHOT, "type": "object"}, component_name="ResourceSnapshot")
class ResourceSnapshotField(JSONObjectField):
    pass


REPORT_METADATA = shape(
    "How the agent reported (SPEC 2.3); absent or null is {}. Any object is accepted.",
    reported_instance_id=read("→ reported_instance_id."),
    report_monotonic_ms=read("Integer → resource_report_monotonic_ms."),
    report_wall_time_ms=read("Integer epoch ms → resource_report_wall_time_ms."),
    agent_snapshot_timestamp_ms=read("Integer epoch ms → agent_snapshot_timestamp_ms."),
    report_seq=read("Integer, one more per report → report_seq. A report with a lower one than the stored "
                    "report's (unless its wall time is newer) is late: answered `stale` and not stored."),
)


@extend_schema_field({**REPORT_METADATA, "type": "object", "nullable": True}, component_name="ReportMetadata")
class ReportMetadataField(ObjectOrNull):
    pass


class Snapshot(serializers.Serializer):
    """A report of an instance's latest snapshot (what ``SnapshotSerializer`` checks by hand)."""

    instance_id = StrictCharField(max_length=NAME_LENGTH, help_text="Trimmed.")
    snapshot = ResourceSnapshotField()
    metadata = ReportMetadataField(required=False)


SNAPSHOT_EXAMPLE = OpenApiExample("A host with one GPU", request_only=True, value={
    "instance_id": "gpu-host-1:8000",
    "snapshot": {
        "schema_version": "resource_snapshot_v1", "agent_version": "0.1.0", "instance_id": "gpu-host-1:8000",
        "timestamp_ms": 1767225600000, "hostname": "gpu-host-1",
        "devices": {
            "cpu": {"utilization_pct": 12.5, "load1": 0.8, "load5": 0.7, "load15": 0.6},
            "memory": {"used_mb": 20480.0, "total_mb": 257000.0, "free_mb": 236520.0},
            "network": [{"iface": "eth0", "rx_mbps": 12.0, "tx_mbps": 3.5, "speed_mbps": 25000}],
            "gpu": [{"index": 0, "uuid": "GPU-0", "name": "NVIDIA H100", "utilization_pct": 61.0,
                     "utilization_pct_max": 90.0, "utilization_sample_ok": True, "utilization_sample_count": 5,
                     "memory_used_mb": 70000.0, "memory_total_mb": 81559.0, "health": "ok"}],
        },
        "runtime": {},
        "capacity_hint": {"memory_free_ratio": 0.9203, "admission_state": "accepting"},
    },
    "metadata": {"reported_instance_id": "gpu-host-1:8000", "report_monotonic_ms": 123456,
                 "report_wall_time_ms": 1767225600010, "agent_snapshot_timestamp_ms": 1767225600000,
                 "report_seq": 42},
})

EXAMPLE_INSTANCE = "gpu-host-1:8000"
CAPABILITIES_EXAMPLE = {
    "schema_version": "1",
    "model": {"identifier": "meta-llama/Llama-3.1-8B-Instruct", "revision": "main"},
    "tokenizer": {"identifier": "meta-llama/Llama-3.1-8B-Instruct", "revision": None},
    "kv_cache": {"layout": "paged", "schema_version": "1", "dtype": "bfloat16", "block_size": 16},
    "parallelism": {"tensor_parallel_size": 2, "pipeline_parallel_size": 1, "data_parallel_size": None},
    "runtime": {"vllm_version": "0.8.1", "lmcache_version": "0.2.0", "supported_cache_features": ["prefix"]},
}
REGISTER_EXAMPLE = OpenApiExample("An agent on a GPU host", request_only=True, value={
    "instance_id": EXAMPLE_INSTANCE, "host": "10.0.0.5", "port": 8000, "endpoints": ["chat/completions"],
    "tags": ["h100"], "meta": {"agent_version": "0.1.0", "hostname": "gpu-host-1"},
    "capabilities": CAPABILITIES_EXAMPLE,
})
HEARTBEAT_EXAMPLE = OpenApiExample("Load", request_only=True, value={
    "instance_id": EXAMPLE_INSTANCE, "inflight": 3, "qps_1m": 1.5, "gpu_util": 61.0,
})
UNREGISTER_EXAMPLE = OpenApiExample("Leave", request_only=True, value={"instance_id": EXAMPLE_INSTANCE})


# --- answers ---------------------------------------------------------------------------------


def fingerprint_field(help_text):
    """A stored capability fingerprint (SPEC 3.2), or null."""
    return serializers.RegexField(r"^sha256:[0-9a-f]{64}$", allow_null=True, help_text=help_text)


class InstanceRegistered(serializers.Serializer):
    instance_id = serializers.CharField(help_text="As sent, or `hp_{host}:{port}` when sent null or \"\".")
    heartbeat_interval_s = serializers.IntegerField(min_value=1, max_value=10, help_text="min(10, max(1, ttl_s // 3)).")
    ttl_s = serializers.IntegerField()
    capability_fingerprint = fingerprint_field("Null without capabilities.")


class UnknownInstance(serializers.Serializer):
    """compat: this Proxy does not know the instance (200, not 404); re-register."""

    ok = Const(False)
    error = Const("unknown_instance")


class CapabilityFingerprintRejected(serializers.Serializer):
    """A heartbeat with only a fingerprint that is not the stored one (SPEC 3.2): liveness and load
    were not refreshed; send the capabilities again."""

    ok = Const(False)
    error = serializers.ChoiceField(choices=["capability_fingerprint_unknown", "capability_fingerprint_mismatch"],
                                    help_text="`…_unknown`: none stored; `…_mismatch`: others stored.")
    requires_capabilities = Const(True)
    expected_fingerprint = fingerprint_field("The stored one; null when none.")
    reported_fingerprint = serializers.CharField(help_text="The one sent.")


class SnapshotAccepted(serializers.Serializer):
    """The snapshot is stored, or, with `stale`, was older than the stored one (a lower `report_seq`)
    and was dropped; both refresh liveness."""

    ok = Const(True)
    stale = Const(True, required=False, help_text="Present only when the report was late and not stored.")


class Unregistered(serializers.Serializer):
    ok = serializers.BooleanField(help_text="true: removed; false: it was not registered. Both 200.")


HEARTBEAT_ANSWER = PolymorphicProxySerializer(
    component_name="InstanceHeartbeatAnswer", resource_type_field_name=None,
    serializers=[OkBody, UnknownInstance, CapabilityFingerprintRejected],
)
SNAPSHOT_ANSWER = PolymorphicProxySerializer(
    component_name="SnapshotAnswer", resource_type_field_name=None, serializers=[SnapshotAccepted, UnknownInstance],
)


class InstanceResourceFigures(serializers.ModelSerializer):
    """An instance's latest snapshot normalised (SPEC 3.1): every field null before the first
    snapshot, and null wherever the snapshot had no finite number (never 0 for unknown)."""

    admission_state = serializers.CharField(allow_null=True, read_only=True, help_text=(
        "capacity_hint.admission_state lower-cased: accepting, degraded, rejecting, or another word an "
        "agent sent."
    ))

    class Meta:
        model = InstanceResource
        fields = RESOURCE_FIELDS
        read_only_fields = RESOURCE_FIELDS


class InstanceResourceWithRaw(InstanceResourceFigures):
    """SPEC 3.1 as list rows show it: the columns and the snapshot as sent."""

    raw_resource = serializers.DictField(read_only=True, help_text="The snapshot as sent; {} before the first.")

    class Meta(InstanceResourceFigures.Meta):
        fields = (*RESOURCE_FIELDS, "raw_resource")


class InstanceLoad(serializers.Serializer):
    """From heartbeats; null until the instance reports it."""

    inflight = nullable_integer()
    qps_1m = nullable_number()
    gpu_util = nullable_number()


class InstanceRow(RegisteredEntryRow):
    """One row of `/v1/instance/list`."""

    instance_id = serializers.CharField()
    capabilities = CapabilitiesFullView()
    capability_fingerprint = fingerprint_field("Of the stored capabilities; null without.")
    load = InstanceLoad()
    resource = InstanceResourceWithRaw()


INSTANCE_HISTORY = history_answer("InstanceHistory", "instance_id",
                                  history_point("InstancePoint", InstanceSample.FIGURES, InstanceSample.ADMISSION))
POOL_HISTORY = history_answer("PoolHistory", "proxy_id",
                              history_point("PoolPoint", PoolResource.FIGURES, PoolResource.ADMISSION))


class SchedulerLink(serializers.Serializer):
    """The last outcome of this Proxy's link to the Scheduler (SPEC 7)."""

    proxy_id = serializers.CharField()
    scheduler_url = serializers.CharField()
    registered = serializers.BooleanField()
    heartbeat_interval_s = nullable_number()
    last_action = serializers.CharField(allow_blank=True)
    last_attempt_at = nullable_number("Epoch seconds.")
    last_ok_at = nullable_number("Epoch seconds.")
    last_error_at = nullable_number("Epoch seconds.")
    last_error = serializers.CharField(allow_null=True)
    consecutive_failures = serializers.IntegerField()


class ProxyStatus(serializers.Serializer):
    ok = Const(True)
    ttl_s = serializers.IntegerField()
    alive_instances = serializers.IntegerField()
    total_instances = serializers.IntegerField()
    expired_instances = serializers.IntegerField(help_text="total − alive.")
    sample_ids = serializers.ListField(child=serializers.CharField(), help_text="Up to 10 ids of alive instances.")
    proxy_id = serializers.CharField()
    scheduler_link = SchedulerLink(allow_null=True, help_text="Null until the link has run.")


class InstanceResourceRow(serializers.Serializer):
    instance_id = serializers.CharField()
    host = serializers.CharField()
    port = serializers.IntegerField()
    last_seen_at = serializers.FloatField()
    is_alive = serializers.BooleanField()
    resource = InstanceResourceFigures()


class InstanceResources(serializers.Serializer):
    instances = InstanceResourceRow(many=True)


class InstanceLoadRow(InstanceLoad):
    instance_id = serializers.CharField()
    is_alive = serializers.BooleanField()
    last_seen_at = serializers.FloatField()


class LoadSources(serializers.Serializer):
    inflight = Const("instance_heartbeat")
    qps_1m = Const("instance_heartbeat")


class InstanceLoads(serializers.Serializer):
    ok = Const(True)
    ttl_s = serializers.IntegerField()
    generated_at = serializers.FloatField(help_text="Epoch seconds.")
    metric_source = LoadSources()
    instances = InstanceLoadRow(many=True)


# pool_resource (SPEC 5)

QUALITY = ["missing", "partial", "complete"]
ADMISSION = Admission.values


def counts(*names):
    return {name: serializers.IntegerField(min_value=0) for name in names}


PoolInstances = type("PoolInstances", (serializers.Serializer,), {
    "__doc__": "Counts: stale = total − alive; missing_resource = alive − with_resource; the admission "
               "states count reporting instances.",
    **counts("total", "alive", "stale", "with_resource", "missing_resource", *ADMISSION),
})


class PoolLoad(serializers.Serializer):
    inflight_total = nullable_integer("Sum over alive instances; null when none reports it.")
    qps_1m_total = nullable_number("Sum over alive instances; null when none reports it.")
    capacity = serializers.IntegerField(help_text="FLEETWATCH_PROXY_CAPACITY; 0 when unset.")
    load_ratio = nullable_number("inflight_total / capacity; null without either.")
    prepare_queue_depth = nullable_integer("Always null: this project has no request queue.")
    ready_queue_depth = nullable_integer("Always null: this project has no request queue.")
    queue_pressure = nullable_number("Always null: this project has no request queue.")


UTILIZATION = ("cpu_avg", "cpu_max", "memory_used_mb", "memory_total_mb", "memory_used_ratio",
               "memory_free_ratio_min", "gpu_util_avg", "gpu_util_max", "gpu_mem_used_mb", "gpu_mem_total_mb",
               "gpu_mem_used_ratio", "network_rx_mbps_total", "network_tx_mbps_total")
PoolUtilization = type("PoolUtilization", (serializers.Serializer,), {
    "__doc__": "Over reporting instances; each null when none has the input, a ratio null over a zero.",
    **{name: nullable_number() for name in UTILIZATION},
    "gpu_count_total": nullable_integer(),
})
PoolFreshness = type("PoolFreshness", (serializers.Serializer,), {
    "__doc__": "now − resource_reported_at over reporting instances, seconds; all null when none.",
    **{name: nullable_number() for name in ("min", "avg", "max")},
})
METRIC_SOURCES = ("instances", "resource", "inflight_total", "qps_1m_total", "load_ratio", "capacity",
                  "prepare_queue_depth", "ready_queue_depth", "queue_pressure", "utilization",
                  "pool_admission_state", "resource_freshness_s")
PoolMetricSource = type("PoolMetricSource", (serializers.Serializer,), {
    "__doc__": "Where each value came from, or `unavailable` when it is null for lack of data.",
    **{name: serializers.CharField() for name in METRIC_SOURCES},
})


@extend_schema_field({"type": "string", "enum": QUALITY, "description": "q(p, e) of SPEC 5: `missing` if e ≤ 0 or "
                      "p ≤ 0, `complete` if p ≥ e, else `partial`."}, component_name="Coverage")
class Coverage(serializers.CharField):
    pass


class PoolMetricQuality(serializers.Serializer):
    """How much of each metric the pool's instances gave."""

    resource = Coverage(help_text="q(with_resource, alive).")
    load = Coverage(help_text="q(non-null inflight + non-null qps, 2 × alive).")
    queue = Coverage(help_text="Always `missing`: this project has no request queue.")


class PoolResourceSummary(serializers.Serializer):
    """The compact pool summary (SPEC 5) this Proxy computes and sends to the Scheduler."""

    schema_version = Const(SCHEMA_VERSION)
    proxy_id = serializers.CharField()
    generated_at = serializers.FloatField(help_text="Epoch seconds.")
    ttl_s = serializers.IntegerField()
    instances = PoolInstances()
    load = PoolLoad()
    utilization = PoolUtilization()
    resource_freshness_s = PoolFreshness()
    pool_admission_state = serializers.ChoiceField(choices=ADMISSION)
    pool_admission_reason = serializers.CharField(help_text="\"<a> accepting, <d> degraded, <r> rejecting, "
                                                            "<alive> alive\".")
    metric_source = PoolMetricSource()
    metric_quality = PoolMetricQuality()


class PoolResourceAnswer(serializers.Serializer):
    ok = Const(True)
    pool_resource = PoolResourceSummary()


class PoolResourceSources(serializers.Serializer):
    ok = Const(True)
    metric_source = PoolMetricSource()
    metric_quality = PoolMetricQuality()
    null_semantics = serializers.CharField()


# --- the operations --------------------------------------------------------------------------

# The snapshot report is served by its own view (proxy_app.views.SnapshotView).
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


instance_schema = extend_schema_view(
    register=write_operation(
        "instance_register", "Register an instance", (
            "Re-register of a known id: host, port and weight replaced; endpoints and tags replaced only "
            "when non-empty; meta merged; capabilities replaced (absent or null clears them); "
            "registered_at, load and the latest resource kept."
        ), InstanceRegister, {200: InstanceRegistered}, "instance", tags=INSTANCES, examples=[REGISTER_EXAMPLE],
    ),
    heartbeat=write_operation(
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
    ),
    unregister=write_operation(
        "instance_unregister", "Unregister an instance",
        "Deletes the instance and records a last status change to `unregistered`.",
        InstanceId, {200: Unregistered}, "instance", tags=INSTANCES, examples=[UNREGISTER_EXAMPLE],
    ),
    list_instances=read_operation(
        "instance_list", "List instances", (
            "Alive instances (with `include_dead`, also those past their TTL), by id. Without `limit` "
            "and `offset`: the bare array (compat); with either: a page object."
        ), page_of(InstanceRow, "Instance"), parameters=[include_dead(False), *PAGING], tags=INSTANCES,
    ),
    history=read_operation(
        "instance_history", "An instance's history", "The instance's figures over a range, oldest first (SPEC 9).",
        INSTANCE_HISTORY, parameters=[entry_id("instance_id", "instance", EXAMPLE_INSTANCE), RANGE],
        errors={404: OpenApiResponse(NOT_FOUND.response, description="No instance and no series under that id.")},
        tags=INSTANCES,
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

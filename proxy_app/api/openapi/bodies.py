"""The Proxy API's request bodies and examples as OpenAPI (SPEC 3, 3.2), capabilities read from
the validator itself. The report bodies declared here are also the rules the API runs on them
(``proxy_app.api.reports`` compiles them with ``BodyChecks``): one declaration for both."""

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.utils import OpenApiExample, extend_schema_field
from rest_framework import serializers

from agent import capabilities as caps
from controlplane.api.fields import JSONObjectField, ObjectOrNull, StrictCharField
from controlplane.api.serializers import HeartbeatSerializerBase, entry_id_field
from controlplane.endpoints.models import NAME_LENGTH
from proxy_app.api.serializers import FINGERPRINT_LENGTH, CapabilitiesField, InstanceIdSerializer, RegisterSerializer

# --- capabilities (SPEC 3.2), read from the validator itself ---------------------------------


def capability_schema(member, direction):
    """The JSON schema of one member of ``agent.capabilities.CAPABILITY``.

    ``request``: what ``parse_capabilities`` accepts (unknown keys anywhere are a 400; a null
    member is read as absent).
    ``response``: what ``full_view`` shows (every field present: typed objects and lists always,
    absent optionals null).
    """
    shown = direction == "response"
    if isinstance(member, caps._Record):
        properties = {key: capability_schema(child, direction) for key, child in member.members.items()}
        schema = {"type": "object", "properties": properties, "nullable": not shown}
        required = list(properties) if direction == "response" else [
            key for key, child in member.members.items() if isinstance(child, caps._RequiredText)]
        if required:
            schema["required"] = required
        if direction == "request":
            schema["additionalProperties"] = False
        return schema
    if isinstance(member, caps._List):
        item = {**capability_schema(member.item, direction), "nullable": False}
        return {"type": "array", "items": item, "maxItems": caps.MAX_ADAPTERS, "nullable": not shown}
    if isinstance(member, caps._Features):
        text = {"type": "string", "maxLength": caps.MAX_TEXT}
        return {"type": "array", "items": text, "maxItems": caps.MAX_FEATURES, "nullable": not shown,
                "description": "Sorted and de-duplicated when stored; [] when absent."}
    if isinstance(member, caps._PositiveInt):
        return {"type": "integer", "minimum": 1, "maximum": 2**31 - 1, "nullable": True}
    if isinstance(member, caps._Object):
        return {"type": "object", "additionalProperties": {}, "nullable": not (shown and member.empty_default)}
    if isinstance(member, caps._Text):
        required = isinstance(member, caps._RequiredText) or (shown and member.default is not None)
        return {"type": "string", "maxLength": caps.MAX_TEXT, "nullable": not required}
    raise TypeError(f"no schema for {member!r}")


def capabilities_component(direction, description):
    schema = capability_schema(caps.CAPABILITY, direction)
    schema.pop("nullable")  # said by the field that holds it
    return {**schema, "description": description}


CAPABILITIES_REQUEST = capabilities_component("request", (
    "The original Instance's typed `InstanceCapability` (SPEC 3.2). Unknown keys anywhere in it are a "
    "400; `configuration` and `layout_parameters` are free-form; a null member is read as absent. "
    "Stored in the original's canonical form: defaults filled in (every typed object and list present, "
    "`schema_version` \"1\", `layout_parameters` {}, `supported_cache_features` []), null optionals "
    "dropped, empty objects and lists kept, features sorted and de-duplicated; the fingerprint is "
    "`sha256:` + the hex SHA-256 of that form as JSON with sorted keys, separators `,` `:` and UTF-8 "
    "text, as the original Instance computes it."
))
CAPABILITIES_VIEW = capabilities_component("response", (
    "The stored capabilities with every field present: defaults filled in, absent optionals null."
))


class CapabilitiesScheme(OpenApiSerializerFieldExtension):
    """``proxy_app.api.serializers.CapabilitiesField``: the typed object the request validates."""

    target_class = "proxy_app.api.serializers.CapabilitiesField"

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


class InstanceHeartbeat(HeartbeatSerializerBase):
    """A heartbeat: load fields present are stored (null: unknown now), absent ones kept.
    With `capabilities` they replace the stored ones (a `capability_fingerprint` beside them is not
    compared, as the original Proxy does); with only a `capability_fingerprint`, it is compared."""

    # With both, the capabilities win: the object is the truth the fingerprint is computed from.
    instance_id = entry_id_field()
    capabilities = CapabilitiesField(required=False, allow_null=True)
    capability_fingerprint = StrictCharField(max_length=FINGERPRINT_LENGTH, required=False, allow_null=True)


class InstanceId(InstanceIdSerializer):
    """The instance to remove."""


def shape(description, **members):
    """Where the Proxy looks inside a member; no type, so any other JSON is accepted there too.

    A member given by its description alone is one the Proxy reads: any JSON is accepted, a value that is not a
    finite number is null. Any other member is a schema of its own (a nested ``shape``).
    """
    return {"description": description, "properties": {
        name: {"description": member} if isinstance(member, str) else member for name, member in members.items()
    }}


GPU_ROW = shape(
    "One GPU. Invalid when `utilization_sample_ok` is false or its quality is invalid, failed, error, "
    "command_error, parse_error or unsupported.",
    utilization_pct_avg="% (window average); else `utilization_pct`, `utilization_gpu_pct`, `gpu_util`, `util`.",
    utilization_pct="% (= the window average).",
    utilization_pct_current="% now → gpu_util_current.",
    utilization_pct_max="% window maximum → gpu_util_max.",
    utilization_sample_ok="Boolean.",
    utilization_sample_quality="`ok`, or why not.",
    utilization_sample_count="Integer → gpu_sample_count (summed).",
    utilization_sample_timestamp_ms="Integer epoch ms of the newest sample → gpu_sample_age_ms.",
    utilization_window_ms="Integer → gpu_sample_window_ms.",
    utilization_source="`nvml` → gpu_sample_source.",
    memory_used_mb="MiB → gpu_mem_used_mb (summed).",
    memory_total_mb="MiB → gpu_mem_total_mb (summed).",
)
RESOURCE_SNAPSHOT = shape(
    "The agent's `resource_snapshot_v1` (SPEC 2.2), stored as sent in `raw_resource` and normalised into the "
    "columns of SPEC 3.1. Any object is accepted: a value that is not a finite number reads as null, never 0, "
    "and a malformed part never rejects the report. The members below are the ones read.",
    schema_version="`resource_snapshot_v1`.",
    timestamp_ms="Integer epoch milliseconds of the sample → resource_ts_ms.",
    devices=shape(
        "The host's devices.",
        cpu=shape("CPU.", utilization_pct="% → cpu_util."),
        memory=shape("Memory (MiB).", used_mb="→ memory_used_mb.", total_mb="→ memory_total_mb.",
                     free_mb="Available → memory_free_mb."),
        network={"description": "Interfaces, the default route's first.", "items": shape(
            "An interface (the first is read).", rx_mbps="Mbit/s → network_rx_mbps.",
            tx_mbps="Mbit/s → network_tx_mbps.")},
        gpu={"description": "GPUs; [] is a host without GPUs (gpu_count 0), absent is unknown.", "items": GPU_ROW},
    ),
    capacity_hint=shape(
        "The agent's verdict.",
        memory_free_ratio="free / total → memory_free_ratio (else computed).",
        admission_state="accepting, degraded or rejecting → admission_state (lower-cased).",
    ),
)


@extend_schema_field({**RESOURCE_SNAPSHOT, "type": "object"}, component_name="ResourceSnapshot")
class ResourceSnapshotField(JSONObjectField):
    pass


REPORT_METADATA = shape(
    "How the agent reported (SPEC 2.3); absent or null is {}. Any object is accepted.",
    reported_instance_id="→ reported_instance_id.",
    report_monotonic_ms="Integer → resource_report_monotonic_ms.",
    report_wall_time_ms="Integer epoch ms → resource_report_wall_time_ms.",
    agent_snapshot_timestamp_ms="Integer epoch ms → agent_snapshot_timestamp_ms.",
    report_seq="Integer, one more per report → report_seq. A report with a lower one than the stored "
               "report's (unless its wall time is newer) is late: answered `stale` and not stored.",
)


@extend_schema_field({**REPORT_METADATA, "type": "object", "nullable": True}, component_name="ReportMetadata")
class ReportMetadataField(ObjectOrNull):
    pass


class Snapshot(serializers.Serializer):
    """A report of an instance's latest snapshot."""

    instance_id = StrictCharField(max_length=NAME_LENGTH, help_text="Trimmed.")
    snapshot = ResourceSnapshotField()
    metadata = ReportMetadataField(required=False, default=dict)


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

"""The Proxy API's answers as OpenAPI: instance rows, the compat answers, the pool summary
(SPEC 3, 5, 9)."""

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from controlplane.api.schema.answers import (
    OkBody,
    RegisteredEntryRow,
    history_answer,
    nullable_integer,
    nullable_number,
)
from controlplane.api.schema.parts import Const
from controlplane.endpoints.admission import Admission
from proxy_app.api.openapi.bodies import CapabilitiesFullView
from proxy_app.ingest.normalise import RESOURCE_FIELDS
from proxy_app.models import InstanceResource, InstanceSample, PoolResource
from proxy_app.pool.aggregation import SCHEMA_VERSION
from proxy_app.pool.least_load import LOAD_SOURCE, QUEUE_KEYS, UNAVAILABLE


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
    engine_status = serializers.CharField(allow_null=True, read_only=True, help_text=(
        "The worst status of the host's engines (SPEC 13): unreachable, timeout, http_error, bad_format or ok; "
        "null without engines."
    ))
    engine_models = serializers.ListField(child=serializers.CharField(), allow_null=True, read_only=True,
                                          help_text="The engines' model names, sorted and distinct; null without "
                                                    "engines.")

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
    fenced = serializers.BooleanField(help_text="Kept out of placement (SPEC 14.2): by router errors, an engine "
                                                "that went down or a GPU in error, until it recovers.")
    fence_reason = serializers.CharField(allow_null=True, help_text="Why it is fenced; null when it is not.")
    resource = InstanceResourceWithRaw()


INSTANCE_HISTORY = history_answer("InstanceHistory", "instance_id", "InstancePoint", InstanceSample)
POOL_HISTORY = history_answer("PoolHistory", "proxy_id", "PoolPoint", PoolResource)


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


def figure_map(help_text):
    return serializers.DictField(child=serializers.FloatField(), help_text=help_text)


class LeastLoadScore(serializers.Serializer):
    """The original Proxy's least-load score: each known signal times its weight, summed. Unknown
    signals are left out (never 0); with none known the total is null."""

    total = nullable_number("Sum of `weighted_components`; null when no signal is known.")
    components = figure_map("The known signals: `inflight` and `qps_1m` from heartbeats (never a queue figure "
                            "here: no queue manager).")
    weighted_components = figure_map("Each known signal with a non-zero weight, times its weight.")
    source = serializers.DictField(child=serializers.CharField(), help_text="Where each component came from.")
    queue_source = Const(UNAVAILABLE, help_text="This Proxy runs no queue manager.")
    weights = figure_map("The original's default weights (inflight 1, qps_1m 0, the queue figures).")


InstanceLoadRow = type("InstanceLoadRow", (InstanceLoad,), {
    "__doc__": "One instance's load; the original's queue figures are null (no queue manager here).",
    "instance_id": serializers.CharField(),
    "is_alive": serializers.BooleanField(),
    "last_seen_at": serializers.FloatField(),
    **{key: nullable_number("Always null: this Proxy runs no queue manager.") for key in QUEUE_KEYS},
    "least_load_score": LeastLoadScore(),
})


class LoadSources(serializers.Serializer):
    inflight = Const(LOAD_SOURCE)
    qps_1m = Const(LOAD_SOURCE)
    queue_depth = Const(UNAVAILABLE, help_text="No queue manager here, so the queue figures are null.")


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
                  "pool_admission_state", "resource_freshness_s", "engine")
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
    engine = Coverage(help_text="q(instances with an ok engine, alive).")


class PoolEngineModel(serializers.Serializer):
    model = serializers.CharField()
    instances = serializers.IntegerField(min_value=0)
    requests_waiting_total = nullable_integer("The whole queue of each instance serving the model.")


class PoolEngine(serializers.Serializer):
    """The serving engines of the pool (SPEC 13), over reporting instances' `ok` engines; null where no input."""

    instances_with_engine = serializers.IntegerField(min_value=0)
    requests_running_total = nullable_integer()
    requests_waiting_total = nullable_integer()
    kv_cache_usage_avg = nullable_number()
    kv_cache_usage_max = nullable_number()
    kv_cache_capacity_tokens_total = nullable_integer()
    ttft_p95_max_s = nullable_number()
    saturation = nullable_number("Mean of min(1, max(waiting ÷ FLEETWATCH_SATURATION_WAITING, kv usage ÷ "
                                 "FLEETWATCH_SATURATION_KV)) over instances with an ok engine.")
    models = PoolEngineModel(many=True, allow_null=True, help_text="Up to 32, most instances first.")


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
    engine = PoolEngine()
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

"""The Proxy API's answers as OpenAPI: the compat answers, the debug answers, the pool summary
(SPEC 3, 5, 9); the instance rows are ``rows``', which their builders read too."""

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from controlplane.api.schema.answers import OkBody, history_answer, nullable_integer, nullable_number
from controlplane.api.schema.parts import Const
from controlplane.endpoints.admission import Admission
from proxy_app.api.openapi.rows import InstanceLoadRow, InstanceResourceRow, fingerprint_field
from proxy_app.models import InstanceSample, PoolResource
from proxy_app.pool.aggregation import SCHEMA_VERSION
from proxy_app.pool.least_load import LOAD_SOURCE, UNAVAILABLE


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


class InstanceResources(serializers.Serializer):
    instances = InstanceResourceRow(many=True)


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

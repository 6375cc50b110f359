"""The Proxy API's answers as OpenAPI: the compat answers, the debug answers (SPEC 3, 5, 9).

The instance rows are ``rows``'; the pool summary and the link's state are
``proxy_app.pool.answers``' (the link, the pages and the recorder build them
too). Every answer here is built from its serializer by ``RowShape.answer_builder``
(``controlplane.api.rows``): the register answer, the reports' answers
(``proxy_app.api.reports``), the debug answers and the histories, so each key
is declared here and nowhere else.
"""

import operator

from drf_spectacular.utils import PolymorphicProxySerializer
from rest_framework import serializers

from controlplane.api.rows import reads
from controlplane.api.schema.answers import OkBody, history_answer
from controlplane.api.schema.parts import Const
from proxy_app.api.openapi.rows import InstanceLoadRow, InstanceResourceRow, fingerprint_field
from proxy_app.managers import UNKNOWN_INSTANCE
from proxy_app.models import InstanceSample, PoolResource
from proxy_app.pool.answers import PoolMetricQuality, PoolMetricSource, PoolResourceSummary, SchedulerLink
from proxy_app.pool.least_load import LOAD_SOURCE, UNAVAILABLE


class InstanceRegistered(serializers.Serializer):
    instance_id = serializers.CharField(help_text="As sent, or `hp_{host}:{port}` when sent null or \"\".")
    heartbeat_interval_s = serializers.IntegerField(min_value=1, max_value=10, help_text="min(10, max(1, ttl_s // 3)).")
    ttl_s = serializers.IntegerField()
    capability_fingerprint = fingerprint_field("Null without capabilities.")


class UnknownInstance(serializers.Serializer):
    """compat: this Proxy does not know the instance (200, not 404); re-register."""

    ok = Const(False)
    error = Const(UNKNOWN_INSTANCE)


class CapabilityFingerprintRejected(serializers.Serializer):
    """A heartbeat with only a fingerprint that is not the stored one (SPEC 3.2): liveness and load
    were not refreshed; send the capabilities again."""

    ok = Const(False)
    error = serializers.ChoiceField(choices=["capability_fingerprint_unknown", "capability_fingerprint_mismatch"],
                                    help_text="`…_unknown`: none stored; `…_mismatch`: others stored.")
    requires_capabilities = Const(True)
    expected_fingerprint = reads(fingerprint_field("The stored one; null when none."), "stored")
    reported_fingerprint = serializers.CharField(help_text="The one sent.")


class SnapshotAccepted(serializers.Serializer):
    """The snapshot is stored, or, with `stale`, was older than the stored one (a lower `report_seq`)
    and was dropped; both refresh liveness."""

    ok = Const(True)
    stale = Const(True, required=False, help_text="Present only when the report was late and not stored.")


class Unregistered(serializers.Serializer):
    ok = serializers.BooleanField(help_text="true: removed; false: it was not registered. Both 200.")


def or_unknown_instance(component_name, *taken):
    """An instance write's 200: what it answers when taken, or ``UnknownInstance`` (one of the schema's oneOf)."""
    return PolymorphicProxySerializer(component_name=component_name, resource_type_field_name=None,
                                      serializers=[*taken, UnknownInstance])


HEARTBEAT_ANSWER = PolymorphicProxySerializer(
    component_name="InstanceHeartbeatAnswer", resource_type_field_name=None,
    serializers=[OkBody, UnknownInstance, CapabilityFingerprintRejected],
)
SNAPSHOT_ANSWER = or_unknown_instance("SnapshotAnswer", SnapshotAccepted)


INSTANCE_HISTORY = history_answer("InstanceHistory", "instance_id", "InstancePoint", InstanceSample)
POOL_HISTORY = history_answer("PoolHistory", "proxy_id", "PoolPoint", PoolResource)


class ProxyStatus(serializers.Serializer):
    ok = Const(True)
    ttl_s = serializers.IntegerField()
    alive_instances = serializers.IntegerField()
    total_instances = serializers.IntegerField()
    expired_instances = reads(serializers.IntegerField(help_text="total − alive."), "total_instances",
                              "alive_instances", using=operator.sub)
    sample_ids = serializers.ListField(child=serializers.CharField(), help_text="Up to 10 ids of alive instances.")
    proxy_id = serializers.CharField()
    scheduler_link = reads(SchedulerLink(allow_null=True, help_text="Null until the link has run."), "scheduler_link")


class InstanceResources(serializers.Serializer):
    instances = reads(InstanceResourceRow(many=True), "instances")


class LoadSources(serializers.Serializer):
    inflight = Const(LOAD_SOURCE)
    qps_1m = Const(LOAD_SOURCE)
    queue_depth = Const(UNAVAILABLE, help_text="No queue manager here, so the queue figures are null.")


class InstanceLoads(serializers.Serializer):
    ok = Const(True)
    ttl_s = serializers.IntegerField()
    generated_at = reads(serializers.FloatField(help_text="Epoch seconds."), "now")
    metric_source = LoadSources()
    instances = reads(InstanceLoadRow(many=True), "instances")


class PoolResourceAnswer(serializers.Serializer):
    ok = Const(True)
    pool_resource = reads(PoolResourceSummary(), "pool_resource")


class PoolResourceSources(serializers.Serializer):
    ok = Const(True)
    metric_source = reads(PoolMetricSource(), "metric_source")
    metric_quality = reads(PoolMetricQuality(), "metric_quality")
    null_semantics = serializers.CharField()

"""Request bodies of the scheduler API (SPEC 6) and the rows it answers with."""

import uuid

from rest_framework import serializers

from controlplane.api import (
    MAX_INFLIGHT,
    JSONObjectField,
    ListOrNull,
    ObjectOrNull,
    StrictCharField,
    StrictFloatField,
    StrictIntegerField,
)
from controlplane.liveness import is_alive, status_at
from scheduler_app.models import default_endpoints

ID_LENGTH = 255
DEFAULT_POLICY = "lru"


def new_proxy_id():
    return f"pxy_{uuid.uuid4().hex[:12]}"


class RegisterSerializer(serializers.Serializer):
    proxy_id = StrictCharField(max_length=ID_LENGTH, required=False, allow_null=True, allow_blank=True)
    host = StrictCharField(max_length=255)
    port = StrictIntegerField(min_value=1, max_value=65535)
    endpoints = ListOrNull(required=False, default=default_endpoints)
    tags = ListOrNull(required=False, default=list)
    weight = StrictFloatField(min_value=0, required=False, default=1.0)
    meta = ObjectOrNull(required=False, default=dict)
    max_capacity = StrictIntegerField(min_value=0, required=False, default=0)
    instance_count = StrictIntegerField(min_value=0, required=False, default=0)
    kv_mem_per_instance_gb = StrictFloatField(min_value=0, required=False, default=0.0)
    kv_cache_update_policy = StrictCharField(
        max_length=64, required=False, allow_null=True, allow_blank=True, default=DEFAULT_POLICY
    )
    pool_resource = JSONObjectField(required=False, allow_null=True, default=None)

    def validate(self, attrs):
        # null or "" mean "not chosen", as in the original.
        if not attrs.get("proxy_id"):
            attrs["proxy_id"] = new_proxy_id()
        if not attrs.get("kv_cache_update_policy"):
            attrs["kv_cache_update_policy"] = DEFAULT_POLICY
        return attrs


class ProxyIdSerializer(serializers.Serializer):
    proxy_id = StrictCharField(max_length=ID_LENGTH)


class HeartbeatSerializer(ProxyIdSerializer):
    # Absent load fields are left out of validated_data, so only the ones
    # sent are written; an explicit null records "unknown now".
    inflight = StrictIntegerField(min_value=0, max_value=MAX_INFLIGHT, required=False, allow_null=True)
    qps_1m = StrictFloatField(min_value=0, required=False, allow_null=True)
    gpu_util = StrictFloatField(min_value=0, max_value=100, required=False, allow_null=True)
    meta_patch = JSONObjectField(required=False, allow_null=True, default=None)
    pool_resource = JSONObjectField(required=False, allow_null=True, default=None)

    LOAD_FIELDS = ("inflight", "qps_1m", "gpu_util")


class HistoryQuerySerializer(serializers.Serializer):
    """Query of ``/debug/proxy_pool_history``."""

    proxy_id = StrictCharField(max_length=ID_LENGTH, required=False)
    since = StrictFloatField(required=False)
    limit = StrictIntegerField(min_value=1, max_value=10_000, required=False, default=500)


# --- answers ------------------------------------------------------------------


def proxy_row(proxy, *, now, ttl_s, heartbeat_interval_s):
    """One row of ``/v1/proxy/list``."""
    return {
        "proxy_id": proxy.proxy_id,
        "host": proxy.host,
        "port": proxy.port,
        "endpoints": proxy.endpoints,
        "tags": proxy.tags,
        "weight": proxy.weight,
        "meta": proxy.meta,
        "max_capacity": proxy.max_capacity,
        "instance_count": proxy.instance_count,
        "kv_mem_per_instance_gb": proxy.kv_mem_per_instance_gb,
        "kv_cache_pool_gb": proxy.kv_cache_pool_gb,
        "kv_cache_update_policy": proxy.kv_cache_update_policy,
        "inflight": proxy.inflight,
        "qps_1m": proxy.qps_1m,
        "gpu_util": proxy.gpu_util,
        "registered_at": proxy.registered_at,
        "last_seen_at": proxy.last_seen_at,
        "is_alive": is_alive(proxy.last_seen_at, now, ttl_s),
        "status": status_at(proxy.last_seen_at, now, ttl_s, heartbeat_interval_s).value,
        "pool_resource": proxy.pool_resource,
        "pool_resource_reported_at": proxy.pool_resource_reported_at,
    }


def sample_row(sample, include_summary):
    """One point of ``/debug/proxy_pool_history``."""
    row = {
        "proxy_id": sample.proxy_id,
        "received_at": sample.received_at,
        "instances_alive": sample.instances_alive,
        "instances_total": sample.instances_total,
        "cpu_avg": sample.cpu_avg,
        "gpu_util_avg": sample.gpu_util_avg,
        "memory_used_ratio": sample.memory_used_ratio,
        "pool_admission_state": sample.pool_admission_state,
    }
    if include_summary:
        row["pool_resource"] = sample.pool_resource
    return row

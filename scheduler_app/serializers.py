"""Request bodies of the scheduler API (SPEC 6) and the rows it answers with."""

import uuid

from rest_framework import serializers

from controlplane.api.fields import JSONObjectField, ListOrNull, StrictCharField, StrictFloatField, StrictIntegerField
from controlplane.api.placement import PlacementBodyBase
from controlplane.api.serializers import (
    HeartbeatSerializerBase,
    RegisterSerializerBase,
    endpoint_row,
    entry_id_field,
    load_dict,
)
from scheduler_app.models import default_endpoints

DEFAULT_POLICY = "lru"


def new_proxy_id():
    return f"pxy_{uuid.uuid4().hex[:12]}"


class RegisterSerializer(RegisterSerializerBase):
    proxy_id = entry_id_field(optional=True)
    endpoints = ListOrNull(required=False, default=default_endpoints)
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
    proxy_id = entry_id_field()


class HeartbeatSerializer(HeartbeatSerializerBase):
    proxy_id = entry_id_field()
    meta_patch = JSONObjectField(required=False, allow_null=True, default=None)
    pool_resource = JSONObjectField(required=False, allow_null=True, default=None)


# --- answers ------------------------------------------------------------------


def proxy_row(proxy, now):
    """One row of ``/v1/proxy/list``."""
    return {
        **endpoint_row(proxy, now),
        "max_capacity": proxy.max_capacity,
        "instance_count": proxy.instance_count,
        "kv_mem_per_instance_gb": proxy.kv_mem_per_instance_gb,
        "kv_cache_pool_gb": proxy.kv_cache_pool_gb,
        "kv_cache_update_policy": proxy.kv_cache_update_policy,
        **load_dict(proxy),
        "pool_resource": proxy.pool_resource,
        "pool_resource_reported_at": proxy.pool_resource_reported_at,
    }


class PoolPlacementSerializer(PlacementBodyBase):
    """``POST /v1/proxy/placement`` (SPEC 14.3)."""

    count = StrictIntegerField(min_value=1, max_value=16, required=False, default=3)

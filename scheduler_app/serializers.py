"""Request bodies of the scheduler API (SPEC 6) and the rows it answers with."""

import uuid

from rest_framework import serializers

from controlplane.api.fields import (
    BodyChecks,
    JSONObjectField,
    ListOrNull,
    StrictCharField,
    StrictFloatField,
    StrictIntegerField,
)
from controlplane.api.placement import PlacementBodyBase
from controlplane.api.rows import RowShape, alive_field, reads
from controlplane.api.schema.answers import RegisteredEntryRow, nullable_integer, nullable_number
from controlplane.api.serializers import HeartbeatSerializerBase, RegisterSerializerBase, entry_id_field
from controlplane.endpoints import liveness
from scheduler_app.models import Proxy, default_endpoints, kv_cache_pool_gb

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


# --- answers: the rows, declared once for the schema and their builder (``controlplane.api.rows``) -------

POOL_RESOURCE_HELP = "The Proxy's pool summary (SPEC 5 shape), stored as sent: any JSON object, not interpreted."


class ProxyRow(RegisteredEntryRow):
    """One row of `/v1/proxy/list`."""

    proxy_id = reads(serializers.CharField(), leads=True)
    max_capacity = serializers.IntegerField(min_value=0)
    instance_count = serializers.IntegerField(min_value=0)
    kv_mem_per_instance_gb = serializers.FloatField(min_value=0)
    kv_cache_pool_gb = reads(serializers.FloatField(min_value=0, help_text="instance_count × kv_mem_per_instance_gb."),
                             "instance_count", "kv_mem_per_instance_gb", using=kv_cache_pool_gb)
    kv_cache_update_policy = serializers.CharField()
    inflight = nullable_integer("From heartbeats; null until reported.")
    qps_1m = nullable_number("From heartbeats; null until reported.")
    gpu_util = nullable_number("From heartbeats; null until reported.")
    pool_resource = serializers.DictField(allow_null=True, help_text=POOL_RESOURCE_HELP + " Null until the first.")
    pool_resource_reported_at = nullable_number("Epoch seconds: when this Scheduler received it.")


class ProxyPoolResourceRow(serializers.Serializer):
    proxy_id = serializers.CharField()
    is_alive = alive_field(serializers.BooleanField())
    last_seen_at = serializers.FloatField()
    pool_resource_reported_at = nullable_number("Epoch seconds: when this Scheduler received it.")
    pool_resource = serializers.DictField(allow_null=True, help_text=POOL_RESOURCE_HELP)


# The JSON columns decoded by Django, not spliced as text: PostgreSQL's jsonb writes a client's 1e300 as
# 301 digits, which the renderer answers as the number sent (tests/api/test_big_numbers.py); a list of
# proxies is short, where the instance list's 10,000 rows are what splicing saves.
LIST_ROW = RowShape(ProxyRow, json_as_text=False)
POOL_RESOURCE_ROW = RowShape(ProxyPoolResourceRow, json_as_text=False)


def proxy_rows(queryset, now, shape=LIST_ROW):
    """Rows of ``/v1/proxy/list`` (or of another ``shape``) for the proxies of ``queryset``, in its order."""
    status_of = liveness.status_reader(now, Proxy.ttl_s(), Proxy.heartbeat_interval_s())
    return shape.builder(status_of=status_of)(shape.query(queryset))


class PoolPlacementSerializer(PlacementBodyBase):
    """``POST /v1/proxy/placement`` (SPEC 14.3)."""

    count = StrictIntegerField(min_value=1, max_value=16, required=False, default=3)


# What ``POST /v1/proxy/placement`` and the fleet page's panel check a body with (as ``PLACEMENT_BODY``).
POOL_PLACEMENT_BODY = BodyChecks(PoolPlacementSerializer, null_is_invalid=True)

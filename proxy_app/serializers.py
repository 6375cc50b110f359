"""Request bodies of the proxy API (SPEC 3) and the rows it answers with."""

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
from proxy_app.normalise import RESOURCE_FIELDS

ID_LENGTH = 255


class RegisterSerializer(serializers.Serializer):
    instance_id = StrictCharField(max_length=ID_LENGTH, required=False, allow_null=True, allow_blank=True)
    host = StrictCharField(max_length=255)
    port = StrictIntegerField(min_value=1, max_value=65535)
    endpoints = ListOrNull(required=False, default=list)
    tags = ListOrNull(required=False, default=list)
    weight = StrictFloatField(min_value=0, required=False, default=1.0)
    meta = ObjectOrNull(required=False, default=dict)
    capabilities = JSONObjectField(required=False, allow_null=True, default=None)

    def validate(self, attrs):
        if not attrs.get("instance_id"):
            attrs["instance_id"] = f"hp_{attrs['host']}:{attrs['port']}"
            if len(attrs["instance_id"]) > ID_LENGTH:
                raise serializers.ValidationError(
                    {"instance_id": [f"hp_{{host}}:{{port}} would be over {ID_LENGTH} characters; send an instance_id."]}
                )
        return attrs


class InstanceIdSerializer(serializers.Serializer):
    instance_id = StrictCharField(max_length=ID_LENGTH)


class HeartbeatSerializer(InstanceIdSerializer):
    inflight = StrictIntegerField(min_value=0, max_value=MAX_INFLIGHT, required=False, allow_null=True)
    qps_1m = StrictFloatField(min_value=0, required=False, allow_null=True)
    gpu_util = StrictFloatField(min_value=0, max_value=100, required=False, allow_null=True)

    LOAD_FIELDS = ("inflight", "qps_1m", "gpu_util")


class SnapshotSerializer(serializers.BaseSerializer):
    """The body of a snapshot report, checked by hand.

    This is the ingest hot path: a declared-field serializer deep-copies its
    fields on every request, which cost more than the whole normalisation.
    The rules are the ones the declared fields would apply: ``instance_id``
    a non-blank string of at most 255 characters (trimmed), ``snapshot`` an
    object, ``metadata`` an object, null or absent.
    """

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise serializers.ValidationError(
                {"non_field_errors": [f"Invalid data. Expected a dictionary, but got {type(data).__name__}."]}
            )
        errors = {}
        instance_id = data.get("instance_id")
        if "instance_id" not in data:
            errors["instance_id"] = ["This field is required."]
        elif not isinstance(instance_id, str):
            errors["instance_id"] = ["This field may not be null." if instance_id is None else "Not a valid string."]
        else:
            instance_id = instance_id.strip()
            if not instance_id:
                errors["instance_id"] = ["This field may not be blank."]
            elif len(instance_id) > ID_LENGTH:
                errors["instance_id"] = [f"Ensure this field has no more than {ID_LENGTH} characters."]
        snapshot = data.get("snapshot")
        if "snapshot" not in data:
            errors["snapshot"] = ["This field is required."]
        elif not isinstance(snapshot, dict):
            errors["snapshot"] = ["Expected a JSON object."]
        metadata = data.get("metadata")
        if metadata is None:
            metadata = {}
        elif not isinstance(metadata, dict):
            errors["metadata"] = ["Expected a JSON object."]
        if errors:
            raise serializers.ValidationError(errors)
        return {"instance_id": instance_id, "snapshot": snapshot, "metadata": metadata}


# --- answers ------------------------------------------------------------------

EMPTY_RESOURCE = {**{name: None for name in RESOURCE_FIELDS}, "raw_resource": {}}


def resource_dict(instance, include_raw=True):
    """The SPEC 3.1 fields of an instance's latest resource (nulls before the first)."""
    resource = getattr(instance, "resource", None) if _has_resource(instance) else None
    if resource is None:
        row = dict(EMPTY_RESOURCE)
    else:
        row = {name: getattr(resource, name) for name in RESOURCE_FIELDS}
        row["raw_resource"] = resource.raw_resource
    if not include_raw:
        row.pop("raw_resource")
    return row


def _has_resource(instance):
    try:
        instance.resource
    except instance._meta.get_field("resource").related_model.DoesNotExist:
        return False
    return True


def instance_row(instance, *, now, ttl_s, heartbeat_interval_s):
    """One row of ``/v1/instance/list``."""
    return {
        "instance_id": instance.instance_id,
        "host": instance.host,
        "port": instance.port,
        "endpoints": instance.endpoints,
        "tags": instance.tags,
        "weight": instance.weight,
        "meta": instance.meta,
        "capabilities": instance.capabilities,
        "registered_at": instance.registered_at,
        "last_seen_at": instance.last_seen_at,
        "status": status_at(instance.last_seen_at, now, ttl_s, heartbeat_interval_s).value,
        "is_alive": is_alive(instance.last_seen_at, now, ttl_s),
        "load": {"inflight": instance.inflight, "qps_1m": instance.qps_1m, "gpu_util": instance.gpu_util},
        "resource": resource_dict(instance),
    }

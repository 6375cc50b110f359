"""Request bodies and answer rows shared by everything that registers and heartbeats.

``Instance`` (SPEC 3) and ``Proxy`` (SPEC 6) take the same register and
heartbeat fields under their own id name; each app's serializers add the id
and what only they have.
"""

from rest_framework import serializers

from controlplane.api.fields import (
    MAX_INFLIGHT,
    ListOrNull,
    ObjectOrNull,
    StrictCharField,
    StrictFloatField,
    StrictIntegerField,
)
from controlplane.endpoints.models import NAME_LENGTH, RegisteredEndpoint


def entry_id_field(optional=False):
    """The id a client names an entry by; ``optional``: null or "" let the server choose."""
    if optional:
        return StrictCharField(max_length=NAME_LENGTH, required=False, allow_null=True, allow_blank=True)
    return StrictCharField(max_length=NAME_LENGTH)


class RegisterSerializerBase(serializers.Serializer):
    host = StrictCharField(max_length=NAME_LENGTH)
    port = StrictIntegerField(min_value=1, max_value=65535)
    endpoints = ListOrNull(required=False, default=list)
    tags = ListOrNull(required=False, default=list)
    weight = StrictFloatField(min_value=0, required=False, default=1.0)
    meta = ObjectOrNull(required=False, default=dict)


class HeartbeatSerializerBase(serializers.Serializer):
    """The load fields of a heartbeat.

    Absent ones are left out of the validated data, so only the ones sent are
    written; an explicit null records "unknown now" (SPEC 12).
    """

    inflight = StrictIntegerField(min_value=0, max_value=MAX_INFLIGHT, required=False, allow_null=True)
    qps_1m = StrictFloatField(min_value=0, required=False, allow_null=True)
    gpu_util = StrictFloatField(min_value=0, max_value=100, required=False, allow_null=True)

    @staticmethod
    def load(data):
        """The load fields present in validated ``data``."""
        return {name: data[name] for name in RegisteredEndpoint.LOAD_FIELDS if name in data}

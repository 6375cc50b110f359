"""Request bodies of the proxy API (SPEC 3); the rows it answers with are built in ``proxy_app.api.listing``."""

from rest_framework import serializers

from agent.capabilities import CapabilityError, full_view, parse_capabilities
from controlplane.api.fields import (
    MAX_INFLIGHT,
    StrictCharField,
    StrictIntegerField,
    check_integer,
    check_number,
    check_text,
)
from controlplane.api.placement import PlacementBodyBase, optional_text
from controlplane.api.serializers import RegisterSerializerBase, entry_id_field
from controlplane.endpoints.models import NAME_LENGTH
from controlplane.figures import MAX_QUANTITY
from proxy_app.placement.fencing import OUTCOMES

FINGERPRINT_LENGTH = len("sha256:") + 64


class CapabilitiesField(serializers.Field):
    """The typed capabilities object of SPEC 3.2, validated into its canonical form."""

    def to_internal_value(self, data):
        return self.parse(data)

    @staticmethod
    def parse(data):
        """The canonical capabilities of ``data`` (not null), else a ``ValidationError``."""
        try:
            return parse_capabilities(data, path="")
        except CapabilityError as error:
            raise serializers.ValidationError(error.errors) from None

    def to_representation(self, value):
        return full_view(value)


class RegisterSerializer(RegisterSerializerBase):
    instance_id = entry_id_field(optional=True)
    # Absent or null clears the stored capabilities.
    capabilities = CapabilitiesField(required=False, allow_null=True, default=None)

    def validate(self, attrs):
        if not attrs.get("instance_id"):
            attrs["instance_id"] = f"hp_{attrs['host']}:{attrs['port']}"
            if len(attrs["instance_id"]) > NAME_LENGTH:
                raise serializers.ValidationError(
                    {"instance_id": [f"hp_{{host}}:{{port}} would be over {NAME_LENGTH} characters; send an instance_id."]}
                )
        return attrs


class InstanceIdSerializer(serializers.Serializer):
    instance_id = entry_id_field()


def heartbeat_report(data):
    """The body of a heartbeat, checked by hand: its validated data, else a ``ValidationError``.

    A heartbeat may carry the capabilities, or only their fingerprint (SPEC
    3.2); load fields sent are in the data (null: unknown now), absent ones
    are not. As with ``snapshot_report``, a declared-field serializer cost
    the hot lane more than the heartbeat's UPDATE. The rules, messages and
    their order are those of its declared twin (``proxy_app.api.openapi.bodies.InstanceHeartbeat``,
    which the schema publishes; ``tests/proxy/test_heartbeat_body_parity.py`` holds them together).
    """
    if data is None:
        raise serializers.ValidationError({"non_field_errors": ["No data provided"]})
    if not isinstance(data, dict):
        raise serializers.ValidationError(
            {"non_field_errors": [f"Invalid data. Expected a dictionary, but got {type(data).__name__}."]}
        )
    report, errors = {}, {}
    for name, check, bounds in LOAD_CHECKS:
        if name in data:
            try:
                report[name] = None if data[name] is None else check(data[name], *bounds)
            except serializers.ValidationError as error:
                errors[name] = error.detail
    if "instance_id" not in data:
        errors["instance_id"] = ["This field is required."]
    elif data["instance_id"] is None:
        errors["instance_id"] = ["This field may not be null."]
    else:
        try:
            report["instance_id"] = check_text(data["instance_id"], NAME_LENGTH)
        except serializers.ValidationError as error:
            errors["instance_id"] = error.detail
    if "capabilities" in data:
        try:
            report["capabilities"] = None if data["capabilities"] is None else CapabilitiesField.parse(
                data["capabilities"])
        except serializers.ValidationError as error:
            errors["capabilities"] = error.detail
    if "capability_fingerprint" in data:
        try:
            fingerprint = data["capability_fingerprint"]
            report["capability_fingerprint"] = None if fingerprint is None else check_text(
                fingerprint, FINGERPRINT_LENGTH)
        except serializers.ValidationError as error:
            errors["capability_fingerprint"] = error.detail
    if errors:
        raise serializers.ValidationError(errors)
    return report


# The load fields of ``HeartbeatSerializerBase``, in its order: (name, check, its bounds).
LOAD_CHECKS = (
    ("inflight", check_integer, (0, MAX_INFLIGHT)),
    ("qps_1m", check_number, (0, MAX_QUANTITY)),
    ("gpu_util", check_number, (0, 100)),
)


def snapshot_report(data):
    """The body of a snapshot report, checked by hand: ``{instance_id, snapshot, metadata}``, else a
    ``ValidationError``.

    This is the ingest hot path: a declared-field serializer deep-copies its
    fields on every request, which cost more than the whole normalisation, and
    even a bare serializer builds a DRF field per report, so the view calls this
    function itself. The rules and messages are the ones its declared twin applies
    (``proxy_app.api.openapi.bodies.Snapshot``, which the schema publishes;
    ``tests/proxy/test_snapshot_serializer_parity.py`` holds them together):
    ``instance_id`` the declared ``StrictCharField`` (``check_text``),
    ``snapshot`` an object, ``metadata`` an object, null or absent.
    """
    if data is None:
        raise serializers.ValidationError({"non_field_errors": ["No data provided"]})
    if not isinstance(data, dict):
        raise serializers.ValidationError(
            {"non_field_errors": [f"Invalid data. Expected a dictionary, but got {type(data).__name__}."]}
        )
    errors = {}
    instance_id = None
    if "instance_id" not in data:
        errors["instance_id"] = ["This field is required."]
    else:
        try:  # the declared field's own check (and its messages) for anything not plainly valid
            instance_id = check_text(data["instance_id"], NAME_LENGTH)
        except serializers.ValidationError as exc:
            errors["instance_id"] = list(exc.detail)
    snapshot = data.get("snapshot")
    if "snapshot" not in data:
        errors["snapshot"] = ["This field is required."]
    elif snapshot is None:
        errors["snapshot"] = ["This field may not be null."]
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


# --- placement (SPEC 14) ---------------------------------------------------------------

MAX_COUNT = 32
SESSION_KEY_LENGTH = 256


class PlacementSerializer(PlacementBodyBase):
    adapter = optional_text(255)
    prompt_tokens = StrictIntegerField(min_value=0, required=False, allow_null=True, default=None)
    max_tokens = StrictIntegerField(min_value=0, required=False, allow_null=True, default=None)
    session_key = optional_text(SESSION_KEY_LENGTH)
    count = StrictIntegerField(min_value=1, max_value=MAX_COUNT, required=False, default=3)


# ``GET /v1/placement/endpoint`` (nginx's auth_request): the fields a router may send as request headers.
# Each is also a query parameter (which wins), as are ``count`` and ``exclude``.
ENDPOINT_HEADERS = {
    "model": "X-Fleetwatch-Model", "adapter": "X-Fleetwatch-Adapter", "session_key": "X-Fleetwatch-Session-Key",
    "prompt_tokens": "X-Fleetwatch-Prompt-Tokens", "max_tokens": "X-Fleetwatch-Max-Tokens",
}
# One destination unless asked for more: ``proxy_pass http://$destination`` takes one host:port.
ENDPOINT_COUNT = 1


class FeedbackSerializer(serializers.Serializer):
    instance_id = StrictCharField(max_length=NAME_LENGTH)
    outcome = serializers.ChoiceField(choices=OUTCOMES)
    status_code = StrictIntegerField(min_value=100, max_value=599, required=False, allow_null=True, default=None)

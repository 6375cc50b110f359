"""Request bodies of the proxy API (SPEC 3); the rows it answers with are built in ``proxy_app.api.listing``."""

from rest_framework import serializers

from agent.capabilities import CapabilityError, full_view, parse_capabilities
from controlplane.api.fields import StrictCharField, StrictIntegerField
from controlplane.api.placement import PlacementBodyBase, optional_text
from controlplane.api.serializers import RegisterSerializerBase, entry_id_field
from controlplane.endpoints.models import NAME_LENGTH
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

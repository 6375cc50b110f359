"""What drf-spectacular cannot read from the code by itself: who may call, and our field types."""

import json

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerFieldExtension
from rest_framework import permissions, serializers

# --- who may call (SPEC 10) ------------------------------------------------------------

BEARER = "bearerAuth"
STAFF_SESSION = "staffSession"


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "controlplane.api.auth.BearerTokenAuthentication"
    name = BEARER

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": (
                "`Authorization: Bearer <token>`, a token made by `manage.py create_token`. "
                "Writes need a token of the endpoint's scope (`instance` for /v1/instance/*, "
                "`proxy` for /v1/proxy/*; an `instance` token bound to ids may write for those "
                "ids only); reads take a token of any scope. A missing, malformed, unknown or "
                "revoked token is a 401, a valid token of the wrong scope a 403. With "
                "`FLEETWATCH_AUTH=off`, or from a network in `FLEETWATCH_TRUSTED_NETWORKS`, "
                "no token is needed."
            ),
        }


class StaffSessionScheme(OpenApiAuthenticationExtension):
    """The dashboards' login: it lets a staff user read, never write."""

    target_class = "controlplane.api.auth.StaffSessionAuthentication"
    name = STAFF_SESSION

    def get_security_requirement(self, auto_schema):
        return {self.name: []} if auto_schema.method in permissions.SAFE_METHODS else None

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "cookie",
            "name": settings.SESSION_COOKIE_NAME,
            "description": "A logged-in staff user's session (the admin's login page): reads only.",
        }


# --- field types ------------------------------------------------------------------------


class Const(serializers.Field):
    """An answer member that always has the same value (``"ok": true``): an enum of one."""

    def __init__(self, value, **kwargs):
        self.value = value
        super().__init__(**kwargs)

    def to_representation(self, value):
        return self.value


JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}


class ConstScheme(OpenApiSerializerFieldExtension):
    target_class = Const

    def map_serializer_field(self, auto_schema, direction):
        value = self.target.value
        # Inside allOf (kept, as it has a sibling), so drf-spectacular's enum hook leaves
        # it inline instead of making each one-value enum (ok: true, ok: false, …) a component.
        return {
            "allOf": [{"type": JSON_TYPES[type(value)], "enum": [value]}],
            "description": f"Always `{json.dumps(value)}`.",
        }


class JSONObjectScheme(OpenApiSerializerFieldExtension):
    """``controlplane.api.fields.JSONObjectField``: any JSON object, nothing else."""

    target_class = "controlplane.api.fields.JSONObjectField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction):
        return {"type": "object", "additionalProperties": {}}


class NullAsDefaultScheme(OpenApiSerializerFieldExtension):
    """``ListOrNull`` and ``ObjectOrNull``: null is taken as absent (old clients send nulls)."""

    target_class = "controlplane.api.fields.NullAsDefaultMixin"
    match_subclasses = True
    priority = 1  # before JSONObjectScheme, which ObjectOrNull also matches

    def map_serializer_field(self, auto_schema, direction):
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        if isinstance(self.target, serializers.JSONField):
            schema = JSONObjectScheme(self.target).map_serializer_field(auto_schema, direction)
        return {**schema, "nullable": True, "description": "null is taken as absent."}


class StrictIdScheme(OpenApiSerializerFieldExtension):
    """A required id or name: trimmed, so it needs a character that is not white space."""

    target_class = "controlplane.api.fields.StrictCharField"

    def map_serializer_field(self, auto_schema, direction):
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        if direction == "request" and not self.target.allow_blank:
            schema["pattern"] = r"\S"
        return schema


class FlatMap(serializers.DictField):
    """``{<field>: [<message>]}``."""

    def __init__(self, **kwargs):
        super().__init__(child=serializers.ListField(child=serializers.CharField()), **kwargs)

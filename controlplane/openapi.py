"""The OpenAPI pieces both control planes share (drf-spectacular, served at ``/api/schema/``).

Each app's ``openapi.py`` describes its own endpoints with these parts and
hands the views one ``extend_schema_view`` decorator, so the views stay
"parse, call one domain function, serialise". What lives here:

- how a request proves who it is (SPEC 10): the bearer token, and for reads
  the dashboards' staff session;
- the error answers every endpoint can give (SPEC 1 and 10), each as its own
  component with its headers (``WWW-Authenticate``, ``Retry-After``);
- query parameters used by more than one endpoint (``include_dead``,
  ``limit``/``offset``, ``range``), and the two shapes of a list answer;
- the figures of a history point (SPEC 9) and the columns every registered
  entry's list row starts with;
- field types the request serializers use that drf-spectacular cannot guess
  (strict JSON objects, lists and objects where null means "absent").

Only the schema is described here: nothing in this module runs on a request.
"""

import json

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerFieldExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
)
from rest_framework import permissions, serializers

from controlplane.history import RANGES
from controlplane.liveness import Status
from controlplane.models import NAME_LENGTH
from controlplane.parsers import MAX_DB_INT
from controlplane.viewsets import MAX_PAGE

# --- who may call (SPEC 10) ------------------------------------------------------------

BEARER = "bearerAuth"
STAFF_SESSION = "staffSession"


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "controlplane.auth.BearerTokenAuthentication"
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

    target_class = "controlplane.auth.StaffSessionAuthentication"
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
    """``controlplane.fields.JSONObjectField``: any JSON object, nothing else."""

    target_class = "controlplane.fields.JSONObjectField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction):
        return {"type": "object", "additionalProperties": {}}


class NullAsDefaultScheme(OpenApiSerializerFieldExtension):
    """``ListOrNull`` and ``ObjectOrNull``: null is taken as absent (old clients send nulls)."""

    target_class = "controlplane.fields.NullAsDefaultMixin"
    match_subclasses = True
    priority = 1  # before JSONObjectScheme, which ObjectOrNull also matches

    def map_serializer_field(self, auto_schema, direction):
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        if isinstance(self.target, serializers.JSONField):
            schema = JSONObjectScheme(self.target).map_serializer_field(auto_schema, direction)
        return {**schema, "nullable": True, "description": "null is taken as absent."}


class StrictIdScheme(OpenApiSerializerFieldExtension):
    """A required id or name: trimmed, so it needs a character that is not white space."""

    target_class = "controlplane.fields.StrictCharField"

    def map_serializer_field(self, auto_schema, direction):
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        if direction == "request" and not self.target.allow_blank:
            schema["pattern"] = r"\S"
        return schema


class FlatMap(serializers.DictField):
    """``{<field>: [<message>]}``."""

    def __init__(self, **kwargs):
        super().__init__(child=serializers.ListField(child=serializers.CharField()), **kwargs)


# --- error answers (SPEC 1, 10) ---------------------------------------------------------

DETAIL_HELP = (
    "Flat: one key per field, a nested field named by its path (`tags[1]`, "
    "`capabilities.kv_cache.block_size`, `body` for the body as a whole), each with its messages."
)


class ValidationErrorBody(serializers.Serializer):
    """Malformed JSON, a wrong type or an out-of-range value (SPEC 1). Nothing was written."""

    ok = Const(False)
    error = Const("validation_error")
    detail = FlatMap(help_text=DETAIL_HELP)


class UnauthorizedBody(serializers.Serializer):
    """No token, or a malformed, unknown or revoked one (SPEC 10). Nothing was written."""

    ok = Const(False)
    error = Const("unauthorized")


class ForbiddenBody(serializers.Serializer):
    """A valid token of the wrong scope, a token bound to other instance ids, or a
    session of a user who is not staff (SPEC 10). Nothing was written."""

    ok = Const(False)
    error = Const("forbidden")


class NotFoundBody(serializers.Serializer):
    """Nothing known under that id."""

    ok = Const(False)
    error = Const("not_found")
    detail = FlatMap(required=False, help_text=DETAIL_HELP)


class MethodNotAllowedBody(serializers.Serializer):
    """A method this path does not serve."""

    ok = Const(False)
    error = Const("method_not_allowed")
    detail = FlatMap(help_text=DETAIL_HELP)


class PayloadTooLargeBody(serializers.Serializer):
    """A body over ``FLEETWATCH_MAX_BODY_BYTES`` (default 256 KiB). Nothing was written."""

    ok = Const(False)
    error = Const("payload_too_large")
    detail = FlatMap(help_text=DETAIL_HELP)


class UnsupportedMediaTypeBody(serializers.Serializer):
    """A body that is not `application/json`. Nothing was written."""

    ok = Const(False)
    error = Const("unsupported_media_type")
    detail = FlatMap(help_text=DETAIL_HELP)


class RateLimitedBody(serializers.Serializer):
    """Too many writes from one token for one instance id in a window (SPEC 10). Nothing was written."""

    ok = Const(False)
    error = Const("rate_limited")
    detail = FlatMap(help_text=DETAIL_HELP)


BAD_REQUEST = OpenApiResponse(
    ValidationErrorBody,
    description="Validation error: malformed JSON, a wrong type, an out-of-range value or query parameter, "
                "text with NUL or unpaired surrogate characters, or JSON nested over 64 levels.",
)
UNAUTHORIZED = OpenApiResponse(UnauthorizedBody, description="No valid token (with `WWW-Authenticate: Bearer`).")
FORBIDDEN = OpenApiResponse(ForbiddenBody, description="Not allowed with these credentials.")
NOT_FOUND = OpenApiResponse(NotFoundBody, description="Unknown id.")
METHOD_NOT_ALLOWED = OpenApiResponse(
    MethodNotAllowedBody,
    description="Another method on this path (answered for any method the path does not serve, before "
                "authentication; `Allow` lists the ones it does).",
)
PAYLOAD_TOO_LARGE = OpenApiResponse(PayloadTooLargeBody, description="Body too large.")
UNSUPPORTED_MEDIA_TYPE = OpenApiResponse(UnsupportedMediaTypeBody, description="Not a JSON body.")
RATE_LIMITED = OpenApiResponse(RateLimitedBody, description="Rate limited: retry after `Retry-After` seconds.")

ERROR_HEADERS = [
    OpenApiParameter(
        "WWW-Authenticate", OpenApiTypes.STR, OpenApiParameter.HEADER, response=[401], required=True,
        enum=["Bearer"], description="Always `Bearer`.",
    ),
    OpenApiParameter(
        "Retry-After", OpenApiTypes.INT, OpenApiParameter.HEADER, response=[429], required=True,
        description="Seconds until a write from this token for this instance id is let in again.",
    ),
]


def read_errors():
    """What any read (GET) of the API can answer besides its own answers."""
    return {400: BAD_REQUEST, 401: UNAUTHORIZED, 403: FORBIDDEN, 405: METHOD_NOT_ALLOWED, 413: PAYLOAD_TOO_LARGE}


def write_errors():
    """What any write (POST) of the API can answer besides its own answers."""
    return {**read_errors(), 415: UNSUPPORTED_MEDIA_TYPE, 429: RATE_LIMITED}


def described(answer, description="OK."):
    """An answer with a description (Swagger UI shows an empty one otherwise)."""
    return answer if isinstance(answer, OpenApiResponse) else OpenApiResponse(answer, description=description)


def read_operation(operation_id, summary, description, answer, parameters=(), errors=None, **kwargs):
    """``extend_schema`` of a read: any token or a staff session; ``answer`` is the 200."""
    return extend_schema(
        operation_id=operation_id, summary=summary,
        description=f"{description}\n\nNeeds a token of any scope, or a staff session.",
        parameters=[*parameters, *ERROR_HEADERS], request=None,
        responses={200: described(answer), **read_errors(), **(errors or {})}, **kwargs,
    )


def write_operation(operation_id, summary, description, request, answers, scope, **kwargs):
    """``extend_schema`` of a write: a token of ``scope``; ``answers`` maps status to answer."""
    return extend_schema(
        operation_id=operation_id, summary=summary,
        description=f"{description}\n\nNeeds a token of scope `{scope}`.",
        parameters=ERROR_HEADERS, request=request,
        responses={**{status: described(answer) for status, answer in answers.items()}, **write_errors()},
        extensions={"x-token-scope": scope}, **kwargs,
    )


class OkBody(serializers.Serializer):
    """Done."""

    ok = Const(True)


# --- query parameters -------------------------------------------------------------------

BOOLEAN_WORDS = "true/false/1/0/yes/no/on/off, any case; anything else is a 400"


def include_dead(default):
    return OpenApiParameter(
        "include_dead", OpenApiTypes.BOOL, OpenApiParameter.QUERY, default=default,
        description=f"Also show entries past their TTL (kept until the retention has passed). {BOOLEAN_WORDS}.",
    )


PAGING = [
    OpenApiParameter(
        "limit", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE}, OpenApiParameter.QUERY, description=(
            f"At most this many rows (1–{MAX_PAGE}). With `limit` or `offset` the answer is a page "
            "object; without either, the bare array of every row (compat)."
        ),
    ),
    OpenApiParameter(
        "offset", {"type": "integer", "minimum": 0, "maximum": MAX_DB_INT}, OpenApiParameter.QUERY,
        description="Rows to skip (0 or more), in the list's order.",
    ),
]
RANGE = OpenApiParameter(
    "range", OpenApiTypes.STR, OpenApiParameter.QUERY, required=True, enum=list(RANGES),
    description="How far back: full resolution up to the full-resolution window (15 min by default), "
                "minute rollups beyond it.",
)


def entry_id(name, what, example):
    return OpenApiParameter(
        name, {"type": "string", "minLength": 1, "maxLength": NAME_LENGTH, "pattern": r"\S"}, OpenApiParameter.QUERY,
        required=True, description=f"The {what}'s id.", examples=[OpenApiExample(what, value=example)],
    )


def entry_history_operation(operation_id, summary, description, answer, key, what, example, **kwargs):
    """``read_operation`` of one entry's series (SPEC 9): its id and the range asked for, a 404 for an unknown id."""
    return read_operation(
        operation_id, summary, description, answer, parameters=[entry_id(key, what, example), RANGE],
        errors={404: OpenApiResponse(NOT_FOUND.response, description=f"No {what} and no series under that id.")},
        **kwargs,
    )


# --- answers shared by both roles -------------------------------------------------------


def page_of(row, name):
    """A list answer: the bare array (no paging parameter) or a page object (``limit``/``offset``)."""
    page = type(f"{name}Page", (serializers.Serializer,), {
        "__doc__": "One page of the list, with the total, so a client can tell how far to go.",
        "count": serializers.IntegerField(help_text="Rows in the whole list."),
        "limit": serializers.IntegerField(allow_null=True, help_text="As asked; null when only `offset` was."),
        "offset": serializers.IntegerField(),
        "results": row(many=True),
    })
    return PolymorphicProxySerializer(
        component_name=f"{name}List", serializers=[row(many=True), page], resource_type_field_name=None, many=False,
    )


class RegisteredEntryRow(serializers.Serializer):
    """The columns every list row of a registered instance or proxy starts with (SPEC 3, 6)."""

    host = serializers.CharField()
    port = serializers.IntegerField(min_value=1, max_value=65535)
    endpoints = serializers.ListField(child=serializers.CharField())
    tags = serializers.ListField(child=serializers.CharField())
    weight = serializers.FloatField(min_value=0)
    meta = serializers.DictField()
    registered_at = serializers.FloatField(help_text="Epoch seconds (the first registration).")
    last_seen_at = serializers.FloatField(help_text="Epoch seconds, server receive time of the last contact.")
    status = serializers.ChoiceField(choices=Status.choices, help_text="SPEC 4, from the TTL at read time.")
    is_alive = serializers.BooleanField(help_text="now − last_seen_at ≤ ttl_s; never null.")


def nullable_number(help_text=""):
    return serializers.FloatField(allow_null=True, help_text=help_text)


def nullable_integer(help_text=""):
    return serializers.IntegerField(allow_null=True, help_text=help_text)


def nullable_text(help_text=""):
    return serializers.CharField(allow_null=True, help_text=help_text)


class FigureRange(serializers.DictField):
    """The lowest or highest value of each figure over a point's minutes."""

    def __init__(self, **kwargs):
        super().__init__(child=serializers.FloatField(allow_null=True), **kwargs)


def history_point(name, figures, admission):
    """A history point (SPEC 9): ``t``, each figure (null where the input was), the admission state,
    and over minutes the ``min`` and ``max`` of each figure."""
    fields = {
        "__doc__": "One point of a series, oldest first. A figure is null where its input was null.",
        "t": serializers.FloatField(help_text="Epoch seconds: the sample, or the start of the point's minutes."),
        **{figure: nullable_number() for figure in figures},
        admission: nullable_text("The worst admission state of the point."),
        "min": FigureRange(required=False, help_text="Minute resolution only: the lowest value of each figure."),
        "max": FigureRange(required=False, help_text="Minute resolution only: the highest value of each figure."),
    }
    return type(name, (serializers.Serializer,), fields)


def history_answer(name, key, point):
    return type(name, (serializers.Serializer,), {
        "__doc__": "A series over a range (SPEC 9).",
        key: serializers.CharField(),
        "range": serializers.ChoiceField(choices=list(RANGES)),
        "resolution_s": serializers.FloatField(help_text="Seconds between points."),
        "points": point(many=True),
    })


# --- /healthz ---------------------------------------------------------------------------


class Health(serializers.Serializer):
    ok = Const(True)
    ttl_s = serializers.IntegerField(help_text="The instance TTL where this process is a Proxy, else the proxy TTL.")
    roles = serializers.ListField(child=serializers.CharField(), help_text="FLEETWATCH_ROLES: `proxy`, `scheduler`.")


health_schema = extend_schema(
    operation_id="healthz", summary="Process health", tags=["health"], request=None,
    description="Open to anyone (no token), touches no database.",
    responses={200: OpenApiResponse(Health, description="The process is up."), 400: BAD_REQUEST,
               405: METHOD_NOT_ALLOWED, 413: PAYLOAD_TOO_LARGE},
)

"""The error answers every endpoint can give (SPEC 1, 10), each a component with its headers."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from controlplane.api.schema.parts import Const, FlatMap

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

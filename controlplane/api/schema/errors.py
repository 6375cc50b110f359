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


def error_answer(code, meaning, description, detail="required"):
    """One error answer: its body is ``{"ok": false, "error": code}`` and, unless ``detail`` is None, the flat
    ``detail`` (``"optional"``: not always sent); the body's component is named after the code (``not_found`` →
    ``NotFoundBody``) and says what it ``means``, the answer its ``description``."""
    fields = {"__doc__": meaning, "ok": Const(False), "error": Const(code)}
    if detail is not None:
        fields["detail"] = FlatMap(required=detail == "required", help_text=DETAIL_HELP)
    body = type("".join(word.capitalize() for word in code.split("_")) + "Body", (serializers.Serializer,), fields)
    return OpenApiResponse(body, description=description)


BAD_REQUEST = error_answer(
    "validation_error", "Malformed JSON, a wrong type or an out-of-range value (SPEC 1). Nothing was written.",
    "Validation error: malformed JSON, a wrong type, an out-of-range value or query parameter, "
    "text with NUL or unpaired surrogate characters, or JSON nested over 64 levels.",
)
UNAUTHORIZED = error_answer(
    "unauthorized", "No token, or a malformed, unknown or revoked one (SPEC 10). Nothing was written.",
    "No valid token (with `WWW-Authenticate: Bearer`).", detail=None,
)
FORBIDDEN = error_answer("forbidden", """A valid token of the wrong scope, a token bound to other instance ids, or a
    session of a user who is not staff (SPEC 10). Nothing was written.""",
                         "Not allowed with these credentials; `detail` says what was needed: the scope "
                         "(`scope`), an instance id of the token's own (`instance_id`) or a staff session "
                         "(`session`).", detail="optional")
NOT_FOUND = error_answer("not_found", "Nothing known under that id.", "Unknown id.", detail="optional")
METHOD_NOT_ALLOWED = error_answer(
    "method_not_allowed", "A method this path does not serve.",
    "Another method on this path (answered for any method the path does not serve, before "
    "authentication; `Allow` lists the ones it does).",
)
PAYLOAD_TOO_LARGE = error_answer(
    "payload_too_large", "A body over ``FLEETWATCH_MAX_BODY_BYTES`` (default 256 KiB). Nothing was written.",
    "Body too large.",
)
LENGTH_REQUIRED = error_answer(
    "length_required", "A body sent chunked (`Transfer-Encoding`) without a `Content-Length`: it is not read, and "
    "never taken for an empty one. Nothing was written.", "Send the body with a `Content-Length`.",
)
UNSUPPORTED_MEDIA_TYPE = error_answer("unsupported_media_type",
                                      "A body that is not `application/json`. Nothing was written.", "Not a JSON body.")
RATE_LIMITED = error_answer(
    "rate_limited", "Too many writes from one token for one instance id in a window (SPEC 10). Nothing was written.",
    "Rate limited: retry after `Retry-After` seconds.",
)
ROUTE_BUSY = error_answer(
    "route_busy", "This web process gave placement and feedback their share of its time "
    "(``FLEETWATCH_ROUTE_SHARE``, issue 30), so the agents' reports keep flowing. Nothing was written.",
    "Route lane busy: retry after `Retry-After` seconds.",
)

DATABASE_UNAVAILABLE = error_answer(
    "database_unavailable", "The database cannot be reached. Nothing was written: send it again after `Retry-After`.",
    "Database unavailable: retry after `Retry-After` seconds.", detail=None,
)

ERROR_HEADERS = [
    OpenApiParameter(
        "WWW-Authenticate", OpenApiTypes.STR, OpenApiParameter.HEADER, response=[401], required=True,
        enum=["Bearer"], description="Always `Bearer`.",
    ),
    OpenApiParameter(
        "Retry-After", OpenApiTypes.INT, OpenApiParameter.HEADER, response=[429, 503], required=True,
        description="Seconds to wait: until a write from this token for this instance id is let in again, or "
                    "the route lane takes requests again (429), or before trying again while the database is "
                    "unavailable (503).",
    ),
]


def read_errors():
    """What any read (GET) of the API can answer besides its own answers."""
    return {400: BAD_REQUEST, 401: UNAUTHORIZED, 403: FORBIDDEN, 405: METHOD_NOT_ALLOWED, 413: PAYLOAD_TOO_LARGE,
            503: DATABASE_UNAVAILABLE}


def write_errors():
    """What any write (POST) of the API can answer besides its own answers."""
    return {**read_errors(), 411: LENGTH_REQUIRED, 415: UNSUPPORTED_MEDIA_TYPE, 429: RATE_LIMITED}


def besides(answers, errors):
    """An operation's ``answers`` first, then each of ``errors`` for a status it does not answer itself."""
    return {**answers, **{status: error for status, error in errors.items() if status not in answers}}

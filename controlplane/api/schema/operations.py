"""Operations as both roles describe them: a read, a write, an entry's history, ``/healthz``;
the query parameters more than one endpoint takes."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema

from controlplane.api.schema.answers import Health, Ready, page_of
from controlplane.api.schema.errors import (
    BAD_REQUEST,
    ERROR_HEADERS,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    PAYLOAD_TOO_LARGE,
    besides,
    read_errors,
    write_errors,
)
from controlplane.api.viewsets import MAX_PAGE
from controlplane.endpoints.models import NAME_LENGTH
from controlplane.figures import MAX_DB_INT
from controlplane.series.history import RANGES


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
        responses=besides({status: described(answer) for status, answer in answers.items()}, write_errors()),
        extensions={"x-token-scope": scope}, **kwargs,
    )


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


def list_operation(operation_id, summary, entries, order, row, name, **kwargs):
    """``read_operation`` of a list of entries (SPEC 3, 6): rows of ``row``, the component names after ``name``."""
    return read_operation(operation_id, summary, (
        f"Alive {entries} (with `include_dead`, also those past their TTL), {order}. Without `limit` and "
        "`offset`: the bare array (compat); with either: a page object."
    ), page_of(row, name), parameters=[include_dead(False), *PAGING], **kwargs)


def entry_history_operation(operation_id, summary, description, answer, key, what, example, **kwargs):
    """``read_operation`` of one entry's series (SPEC 9): its id and the range asked for, a 404 for an unknown id."""
    return read_operation(
        operation_id, summary, description, answer, parameters=[entry_id(key, what, example), RANGE],
        errors={404: OpenApiResponse(NOT_FOUND.response, description=f"No {what} and no series under that id.")},
        **kwargs,
    )


# --- /healthz ---------------------------------------------------------------------------

health_schema = extend_schema(
    operation_id="healthz", summary="Process health", tags=["health"], request=None,
    description="Open to anyone (no token), touches no database.",
    responses={200: OpenApiResponse(Health, description="The process is up."), 400: BAD_REQUEST,
               405: METHOD_NOT_ALLOWED, 413: PAYLOAD_TOO_LARGE},
)


ready_schema = extend_schema(
    operation_id="readyz", summary="Readiness", tags=["health"], request=None,
    description="Open to anyone (no token). Reads the database: reachable, every migration applied, and on a "
                "Proxy the recorder and the link at work. 503 names the checks that failed.",
    responses={200: OpenApiResponse(Ready, description="Ready: every check passed."),
               503: OpenApiResponse(Ready, description="Not ready: `failed` names the checks."),
               400: BAD_REQUEST, 405: METHOD_NOT_ALLOWED, 413: PAYLOAD_TOO_LARGE},
)

"""Shared API base: parsing, the error envelope, strict fields, the base viewset.

Every endpoint of both control planes is a ``ControlPlaneViewSet``, so
authentication and permissions (token auth, SPEC section 10) are added here
once, and every error leaves in the envelope of SPEC section 1.
"""

import math

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse
from rest_framework import exceptions, serializers, status, viewsets
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.response import Response

from controlplane.env import parse_bool
from controlplane.errors import error_body
from controlplane.parsers import MAX_DB_INT

# The largest float any request field accepts (see StrictFloatField).
MAX_QUANTITY = 1e15
# In-flight requests of one instance or proxy; summed over a pool, so bounded
# well below what a 64-bit sum could overflow at.
MAX_INFLIGHT = 2**31 - 1


# --- errors -------------------------------------------------------------------


def envelope_exception_handler(exc, context):
    """Turn every API exception into ``{"ok": false, "error", "detail"}``."""
    if isinstance(exc, RequestDataTooBig):
        limit = settings.FLEETWATCH_MAX_BODY_BYTES
        return Response(
            error_body("payload_too_large", {"body": [f"Request body is larger than {limit} bytes."]}),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, exceptions.ParseError):
        return Response(
            error_body("validation_error", {"body": [str(exc.detail)]}),
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, exceptions.ValidationError):
        detail = exc.detail
        if not isinstance(detail, dict):
            detail = {"body": detail if isinstance(detail, list) else [detail]}
        return Response(error_body("validation_error", detail), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, exceptions.APIException):
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else exc.default_code
        return Response(error_body(code, {"body": [str(exc.detail)]}), status=exc.status_code)
    return None


# --- strict fields --------------------------------------------------------------


class StrictCharField(serializers.CharField):
    """A string, and only a string (DRF would turn 123 into "123")."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """An integer; booleans and fractional numbers are refused."""

    def __init__(self, **kwargs):
        kwargs.setdefault("max_value", MAX_DB_INT)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if isinstance(data, bool) or (isinstance(data, float) and not data.is_integer()):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    """A finite number (numeric strings accepted, as the original's pydantic did).

    At most ``MAX_QUANTITY`` unless told otherwise: no weight, rate or size in
    this API comes near it, and sums and products of accepted values must stay
    finite, or they could not be stored or sent back as JSON.
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("max_value", MAX_QUANTITY)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if isinstance(data, bool):
            self.fail("invalid")
        value = super().to_internal_value(data)
        if not math.isfinite(value):
            self.fail("invalid")
        return value


class StrictListOfStrings(serializers.ListField):
    def __init__(self, **kwargs):
        kwargs.setdefault("child", StrictCharField(max_length=1024, allow_blank=True))
        kwargs.setdefault("max_length", 256)
        super().__init__(**kwargs)


class JSONObjectField(serializers.JSONField):
    """A JSON object (dict); lists and scalars are refused."""

    default_error_messages = {"not_object": "Expected a JSON object."}

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            self.fail("not_object")
        return data


class NullAsDefaultMixin:
    """Treat an explicit null like an absent field (old clients send nulls)."""

    def validate_empty_values(self, data):
        if data is None and self.default is not serializers.empty:
            return True, self.get_default()
        return super().validate_empty_values(data)


class ListOrNull(NullAsDefaultMixin, StrictListOfStrings):
    pass


class ObjectOrNull(NullAsDefaultMixin, JSONObjectField):
    pass


# --- base viewset ---------------------------------------------------------------


OK_BODY = b'{"ok":true}'


def ok_response():
    """``{"ok": true}``, pre-rendered: the answer to nearly every heartbeat and
    snapshot, where building and rendering a DRF Response showed on the profile."""
    return HttpResponse(OK_BODY, content_type="application/json")


def query_bool(request, name, default):
    """A query boolean as SPEC section 1 reads them; 400 for anything else."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    value = parse_bool(raw)
    if value is None:
        raise exceptions.ValidationError({name: ["Must be one of true/false/1/0/yes/no/on/off."]})
    return value


def query_int(request, name, minimum=0, maximum=None):
    """An optional non-negative integer query parameter; 400 when malformed."""
    raw = request.query_params.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise exceptions.ValidationError({name: ["Must be an integer."]}) from None
    if value < minimum or (maximum is not None and value > maximum):
        raise exceptions.ValidationError({name: [f"Must be between {minimum} and {maximum}."]})
    return value


class JSONOnlyNegotiation(BaseContentNegotiation):
    """Every answer is JSON: no Accept-header matching per request (it showed on the ingest profile)."""

    def select_parser(self, request, parsers):
        content_type = (request.content_type or "").split(";")[0].strip().lower()
        return next((parser for parser in parsers if parser.media_type == content_type), None)

    def select_renderer(self, request, renderers, format_suffix=None):
        renderer = renderers[0]
        return renderer, renderer.media_type


class ControlPlaneViewSet(viewsets.ViewSet):
    """Base of every API endpoint: JSON in and out, the SPEC error envelope.

    Authentication and permissions live here so token auth is added once.
    """

    authentication_classes = []
    permission_classes = []
    content_negotiation_class = JSONOnlyNegotiation

    def rows_response(self, queryset, row):
        """A list endpoint's answer: the bare array SPEC asks for, or with
        ``limit``/``offset`` a page object, so a client can tell how far to go."""
        limit = query_int(self.request, "limit", minimum=1, maximum=10_000)
        offset = query_int(self.request, "offset")
        if limit is None and offset is None:
            return Response([row(item) for item in queryset])
        offset = offset or 0
        page = queryset[offset: offset + limit] if limit is not None else queryset[offset:]
        return Response({
            "count": queryset.count(),
            "limit": limit,
            "offset": offset,
            "results": [row(item) for item in page],
        })

    def validated(self, serializer_class):
        """Validate ``request.data`` (an object) or raise the 400 envelope."""
        serializer = serializer_class(data=self.request.data)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data

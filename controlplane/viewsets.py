"""The base of every API endpoint of both control planes.

Every endpoint is a ``ControlPlaneViewSet``: JSON in and out, errors in the
envelope of SPEC section 1 (``controlplane.errors``), and one place where
authentication and permissions are declared.
"""

import orjson
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse
from rest_framework import exceptions, viewsets
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane import clock, errors
from controlplane.auth import (
    BearerTokenAuthentication,
    ScopedAccess,
    StaffSessionAuthentication,
    WriteRateThrottle,
    may_access,
    write_allowance,
)
from controlplane.env import parse_bool
from controlplane.history import RANGES
from controlplane.models import NAME_LENGTH
from controlplane.parsers import MAX_DB_INT, parse_json_body

OK_BODY = b'{"ok":true}'
# The most rows one page of a list answers.
MAX_PAGE = 10_000


def ok_response():
    """``{"ok": true}``, pre-rendered: the answer to nearly every heartbeat and
    snapshot, where building and rendering a DRF Response showed on the profile."""
    return HttpResponse(OK_BODY, content_type="application/json")


def json_response(body):
    """A JSON answer without DRF's rendering (for ``HotWriteView``)."""
    return HttpResponse(orjson.dumps(body), content_type="application/json")


def query_bool(request, name, default):
    """A query boolean as SPEC section 1 reads them; 400 for anything else."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    value = parse_bool(raw)
    if value is None:
        raise exceptions.ValidationError({name: ["Must be one of true/false/1/0/yes/no/on/off."]})
    return value


def query_int(request, name, minimum=0, maximum=MAX_DB_INT):
    """An optional integer query parameter within [minimum, maximum]; 400 when not."""
    raw = request.query_params.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise exceptions.ValidationError({name: ["Must be an integer."]}) from None
    if not minimum <= value <= maximum:
        raise exceptions.ValidationError({name: [f"Must be between {minimum} and {maximum}."]})
    return value


def query_choice(request, name, choices):
    """A required query parameter that must be one of ``choices``; 400 otherwise."""
    raw = request.query_params.get(name)
    if raw in choices:
        return raw
    expected = f"One of {', '.join(choices)}."
    problem = f"This parameter is required. {expected}" if raw is None else f"Unknown value. {expected}"
    raise exceptions.ValidationError({name: [problem]})


def query_id(request, name):
    """A required id in the query string; 400 when missing or too long."""
    raw = request.query_params.get(name, "").strip()
    if not raw:
        raise exceptions.ValidationError({name: ["This parameter is required."]})
    if len(raw) > NAME_LENGTH:
        raise exceptions.ValidationError({name: [f"Ensure this parameter has no more than {NAME_LENGTH} characters."]})
    return raw


class JSONOnlyNegotiation(BaseContentNegotiation):
    """Every answer is JSON: no Accept-header matching per request (it showed on the ingest profile)."""

    def select_parser(self, request, parsers):
        content_type = (request.content_type or "").split(";")[0].strip().lower()
        return next((parser for parser in parsers if parser.media_type == content_type), None)

    def select_renderer(self, request, renderers, format_suffix=None):
        renderer = renderers[0]
        return renderer, renderer.media_type


class MethodFirstMixin:
    """A method the endpoint does not serve is a 405 whoever asks: checked
    before authentication, so it never reads as a 401 or 403."""

    def initial(self, request, *args, **kwargs):
        if getattr(self, request.method.lower(), None) is None:
            raise exceptions.MethodNotAllowed(request.method)
        super().initial(request, *args, **kwargs)


class ControlPlaneViewSet(MethodFirstMixin, viewsets.ViewSet):
    """Base of every API endpoint: JSON in and out, the SPEC error envelope, one access policy.

    A subclass names the token scope its writes need (``write_scope``);
    reads need any valid token or a staff session (``controlplane.auth``).
    """

    authentication_classes = [BearerTokenAuthentication, StaffSessionAuthentication]
    permission_classes = [ScopedAccess]
    throttle_classes = [WriteRateThrottle]
    content_negotiation_class = JSONOnlyNegotiation
    write_scope = None

    def rows_response(self, queryset, rows):
        """A list endpoint's answer: the bare array SPEC asks for, or with
        ``limit``/``offset`` a page object, so a client can tell how far to go.

        ``rows(queryset)`` builds the answer's rows of a (sliced) queryset.
        """
        limit = query_int(self.request, "limit", minimum=1, maximum=MAX_PAGE)
        offset = query_int(self.request, "offset")
        if limit is None and offset is None:
            return Response(rows(queryset))
        offset = offset or 0
        # The page is picked among the bare ids, then only its rows are read in
        # full: OFFSET on the joined rows would join every row it skips.
        ids = queryset.values("pk")
        ids = ids[offset: offset + limit] if limit is not None else ids[offset:]
        page = queryset.filter(pk__in=ids)
        return Response({"count": queryset.count(), "limit": limit, "offset": offset, "results": rows(page)})

    def series_response(self, series, head, key_value=None):
        """A history answer (SPEC 9): ``head`` (the id), the range, its resolution and the points."""
        range_name = query_choice(self.request, "range", RANGES)
        resolution_s, points = series.read(key_value, range_name, clock.now())
        return Response({**head, "range": range_name, "resolution_s": resolution_s, "points": points})

    def validated(self, serializer_class):
        """Validate ``request.data`` (an object) or raise the 400 envelope."""
        serializer = serializer_class(data=self.request.data)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data


class HotWriteView(APIView):
    """A write agents send every second, with the API's rules and without DRF's per-request machinery.

    A snapshot report is most of a Proxy's traffic, and DRF's request
    wrapping, negotiation and per-request policy objects cost it more than
    normalising and storing the snapshot. This view applies the very same
    steps as ``ControlPlaneViewSet``, in the same order and with the same
    functions (``controlplane.auth``, ``parse_json_body``, the error
    envelope): 405, 401, 415, 400, 403, 429, then ``post(request)`` with
    ``request.data`` and ``request.auth`` set. It is an APIView only so the
    OpenAPI schema describes it like every other endpoint.
    """

    write_scope = None
    # Declared for the schema (who may call it); dispatch applies them itself.
    authentication_classes = [BearerTokenAuthentication]
    permission_classes = [ScopedAccess]

    def dispatch(self, request, *args, **kwargs):
        response = self._answer(request)
        response["Allow"] = "POST"  # as DRF's views say on every answer (RFC 9110 asks it of a 405)
        return response

    def _answer(self, request):
        try:
            if request.method != "POST":
                raise exceptions.MethodNotAllowed(request.method)
            grant = None
            if request.META.get("HTTP_AUTHORIZATION"):
                grant = BearerTokenAuthentication().authenticate(request)[1]
            body = request.body
            data = {}
            if body:  # as DRF: an empty body is no data, whatever its content type
                if request.content_type != "application/json":
                    raise exceptions.UnsupportedMediaType(request.content_type)
                data = parse_json_body(body)
            allowed, grant = may_access(request, grant, data, self.write_scope)
            if not allowed:
                raise exceptions.PermissionDenied() if grant is not None else exceptions.NotAuthenticated()
            allowed, retry_after = write_allowance(request, grant, data)
            if not allowed:
                raise exceptions.Throttled(retry_after)
            request.data, request.auth = data, grant
            return self.post(request)
        except (exceptions.APIException, RequestDataTooBig) as exc:
            return errors.envelope_exception_handler(exc, {"view": self})

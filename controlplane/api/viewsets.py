"""The base of every API endpoint of both control planes.

Every endpoint is a ``ControlPlaneViewSet``: JSON in and out, errors in the
envelope of SPEC section 1 (``controlplane.api.errors``), and one place where
authentication and permissions are declared.
"""

from rest_framework import exceptions, viewsets
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.response import Response

from controlplane import clock
from controlplane.api.auth import BearerTokenAuthentication, ScopedAccess, StaffSessionAuthentication, WriteRateThrottle
from controlplane.endpoints.models import NAME_LENGTH
from controlplane.env import parse_bool, parse_int
from controlplane.figures import MAX_DB_INT
from controlplane.series.history import RANGES

# The most rows one page of a list answers.
MAX_PAGE = 10_000


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
    value = parse_int(raw)
    if value is None:
        raise exceptions.ValidationError({name: ["Must be an integer (ASCII digits)."]})
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
    reads need any valid token or a staff session (``controlplane.api.auth``).
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

    def series_response(self, series, answer, key_value=None, **head):
        """A history answer (SPEC 9): ``answer`` (the builder of the schema's ``history_answer``) of ``head``
        (the id), the range, its resolution and the points."""
        range_name = query_choice(self.request, "range", RANGES)
        resolution_s, points = series.read(key_value, range_name, clock.now())
        return Response(answer(**head, range=range_name, resolution_s=resolution_s, points=points))

    def validated(self, serializer_class):
        """Validate ``request.data`` (an object) or raise the 400 envelope."""
        serializer = serializer_class(data=self.request.data)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data

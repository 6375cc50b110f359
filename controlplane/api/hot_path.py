"""The hot path's shortcuts: pre-rendered answers, and ``HotWriteView`` for the writes agents send every second.

Each does by hand what DRF would do for every other endpoint, because DRF's
per-request machinery showed on the ingest profile; the parity tests
(``tests/controlplane/test_hot_path_parity.py``) hold them to DRF's answers.
"""

from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse
from rest_framework import exceptions
from rest_framework.views import APIView

from controlplane.api import errors, renderers, route_gate
from controlplane.api.auth import BearerTokenAuthentication, ScopedAccess, may_access, refusal_detail, write_allowance
from controlplane.api.parsers import parse_json_body
from controlplane.api.rows import answers_of
from controlplane.api.schema.answers import OkBody

# ``{"ok": true}``: its declaration (``OkBody``, which the schema publishes) built and rendered once.
OK_BODY = renderers.dumps(answers_of(OkBody)[0]())


def ok_response():
    """``{"ok": true}``, pre-rendered: the answer to nearly every heartbeat and
    snapshot, where building and rendering a DRF Response showed on the profile."""
    return HttpResponse(OK_BODY, content_type="application/json")


def json_response(body, status=200, headers=None):
    """A JSON answer without DRF's rendering (for ``HotWriteView``)."""
    return HttpResponse(renderers.dumps(body), content_type="application/json", status=status, headers=headers)


class HotWriteView(APIView):
    """A write agents send every second, with the API's rules and without DRF's per-request machinery.

    A snapshot report is most of a Proxy's traffic, and DRF's request
    wrapping, negotiation and per-request policy objects cost it more than
    normalising and storing the snapshot. This view applies the very same
    steps as ``ControlPlaneViewSet``, in the same order and with the same
    functions (``controlplane.api.auth``, ``parse_json_body``, the error
    envelope): 405, 401, 415, 400, 403, 429, then ``respond(data, grant)``
    (``answer_write``). It is an APIView only so the OpenAPI schema describes
    it like every other endpoint (through ``post``, which a subclass decorates).

    Under ``up`` its path is answered by the hot lane (``controlplane.ops.hot_lane``),
    which finds it in the URLconf: a new hot write is one ``path()`` line of
    a ``urls.py``; the lane calls the same ``answer_write`` with a record of
    the WSGI environ (``method``, ``META``, ``body``, ``content_type``).
    """

    write_scope = None
    # Placement and its feedback are never throttled: a router asks once per request it routes.
    rate_limited = True
    # ... but they pass the route lane's gate instead (``controlplane.api.route_gate``): so many at once per process.
    route_lane = False
    # The one method it answers; a GET (placement for nginx's auth_request) has no body and needs
    # ``write_scope`` as a write would (``scoped_read``), its data read from the request (``request_data``).
    http_method = "POST"
    # A POST's body to data: ``parse_json_body``, as every endpoint's, or the view's own reading of the same JSON.
    parse_body = staticmethod(parse_json_body)
    # Declared for the schema (who may call it); dispatch applies them itself.
    authentication_classes = [BearerTokenAuthentication]
    permission_classes = [ScopedAccess]

    def dispatch(self, request, *args, **kwargs):
        return answer_write(self, request)

    def post(self, request):
        """What the schema describes (a subclass decorates it); both entry points answer through ``respond``."""
        return self.respond(request.data, request.auth)

    def request_data(self, request):
        """The data ``respond`` answers, for a method without a body (a POST's is its JSON body)."""
        return {}

    def respond(self, data, grant):
        """The endpoint itself: an answer to the parsed body ``data`` of a caller allowed as ``grant``."""
        raise NotImplementedError

    def refused(self, response, exc):
        """The error answer of ``exc`` as this endpoint gives it (a subclass may add a header)."""
        return response


def answer_write(view, request):
    """A ``HotWriteView``'s answer, for Django's request and the hot lane's alike.

    The steps, each one function shared with every other endpoint: 405 (any
    method but the view's ``http_method``), 401 (``BearerTokenAuthentication``),
    415, 400 (``view.parse_body``; a GET reads no body), 403 (``may_access``),
    429 (``write_allowance``, unless the view is not ``rate_limited``; the route
    lane's gate for a ``route_lane`` view), then ``view.respond(data, grant)`` (any other view's counted as a
    write in flight, which the route lane lets go first); an API error's answer passes through
    ``view.refused``. ``request`` needs ``method``, ``META``, ``content_type``
    and ``body`` only (a GET's ``request_data`` may read more).
    """
    try:
        if request.method != view.http_method:
            raise exceptions.MethodNotAllowed(request.method)
        grant = None
        if request.META.get("HTTP_AUTHORIZATION"):
            grant = BearerTokenAuthentication().authenticate(request)[1]
        data = {}
        reads_body = view.http_method == "POST"
        body = request.body if reads_body else b""
        if body:  # as DRF: an empty body is no data, whatever its content type
            if request.content_type != "application/json":
                raise exceptions.UnsupportedMediaType(request.content_type)
            data = view.parse_body(body)
        allowed, grant = may_access(request, grant, data, view.write_scope, scoped_read=not reads_body)
        if not allowed:
            if grant is None:
                raise exceptions.NotAuthenticated()
            raise exceptions.PermissionDenied(refusal_detail(request, grant, view.write_scope, not reads_body))
        if view.rate_limited:
            allowed, retry_after = write_allowance(request, grant, data)
            if not allowed:
                raise exceptions.Throttled(retry_after)
        data = data if reads_body else view.request_data(request)
        respond = route_gate.admitted if view.route_lane else route_gate.writing
        response = respond(view.respond, data, grant)
    except (exceptions.APIException, RequestDataTooBig) as exc:
        response = view.refused(errors.envelope_exception_handler(exc, {"view": view}), exc)
    response["Allow"] = view.http_method  # as DRF's views say on every answer (RFC 9110 asks it of a 405)
    return response

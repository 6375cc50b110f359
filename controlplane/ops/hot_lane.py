"""The hot lane: the WSGI callable ``up`` serves, answering the hot writes straight from the WSGI environ.

An agent's snapshot and heartbeat are nearly all of a Proxy's requests (and a
router's placement asks and feedback most of the rest), and Django's floor (its
request object, the request signals, fourteen middleware, the URL resolver)
cost about as much as the work of storing one (bench/README.md). For every path
served by a ``HotWriteView`` the hot lane does, in order:

1. Looks the path up in its route table: every URL pattern of the URLconf whose
   view is a ``HotWriteView`` (``lane_routes``), so a hot write joins the lane by
   being one in a ``urls.py``. Any other path, and any request a skipped
   middleware could act on (a cookie, a query string, a form body, an https
   redirect), goes to Django as it is (``HotLane.route_of``).
2. Runs what ``request_started`` runs (``reset_queries``, ``close_old_connections``:
   ``CONN_MAX_AGE``, health checks, a broken connection dropped) by calling the
   receivers connected now (read again only when they change, ``Receivers``),
   without the signal's dispatch;
   ``request_finished``'s (the same, and ``close_caches``) when the server closes
   the answer.
3. Answers through the rules of the middleware it stands for, each the same
   function that middleware calls, in the middleware's order: the request
   metrics (``count_answer``), the outage's recovery (``answered_watching_recovery``),
   the body size limit (``body_size_refusal``), the ``Host:`` check (Django's
   own ``get_host`` on ``ALLOWED_HOSTS``, answered and logged as Django does),
   then the view's steps (``answer_write``: 405, 401, 415, 400, 403, 429 and the
   view's ``respond``); an exception is Django's ``handler500``'s (the outage's 503).
4. Adds the headers the security, common and clickjacking middleware would,
   rendered once from the settings (``lane_headers``), to the answers those
   middleware would have seen, and logs an error answer as ``django.request`` does.

The private Django APIs it leans on are named in ``controlplane.private_django``.
``tests/controlplane/test_hot_lane.py`` holds every answer (status, body, every
header, metrics, log lines) to Django's, and the endpoints' own tests run through
both entry points (``tests/hot_lane.py``).
"""

import logging
import re
import time

from django.conf import settings
from django.core import signals
from django.core.exceptions import DisallowedHost, ImproperlyConfigured, RequestDataTooBig
from django.core.handlers.wsgi import get_script_name
from django.http import HttpRequest, HttpResponse, QueryDict
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.security import SecurityMiddleware
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils.http import parse_header_parameters
from django.utils.log import log_response

from controlplane.api import errors
from controlplane.api.body_length import declared_length
from controlplane.api.hot_path import HotWriteView, answer_write
from controlplane.api.middleware import FORM_TYPES, body_size_refusal
from controlplane.api.outage import answered_watching_recovery
from controlplane.ops.metrics import count_answer

# The middleware of settings.MIDDLEWARE whose rules the lane applies itself (see the module's docstring).
STANDS_FOR = {
    "controlplane.ops.metrics.RequestMetricsMiddleware",
    "controlplane.api.outage.DatabaseRecoveryMiddleware",
    "controlplane.api.middleware.BodySizeLimitMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
}
# Middleware that can do nothing to a request the lane keeps, and why.
STEPS_ASIDE = {
    # Acts on a NUL in the path (a route has none), the query, a form or a cookie (handed over).
    "controlplane.api.middleware.NulCharacterMiddleware",
    # Without a cookie there is no session to load or save.
    "django.contrib.sessions.middleware.SessionMiddleware",
    # A HotWriteView is an APIView, exempt from CSRF; it sets no CSRF cookie.
    "django.middleware.csrf.CsrfViewMiddleware",
    # The page-only middleware steps aside on every API path anyway.
    "controlplane.api.middleware.ApiLaneMiddleware",
    "controlplane.api.middleware.WhiteNoiseMiddleware",
    "controlplane.api.middleware.AuthenticationMiddleware",
    "controlplane.api.middleware.MessageMiddleware",
    "controlplane.api.middleware.HtmxMiddleware",
}
UNMATCHED = "unmatched"  # the metrics' view label of an answer given before Django resolves the URL
KNOWN_HOSTS = 64  # Host: values found allowed, remembered so the check runs once per value


class LaneRequest:
    """What the rules read of a request, straight from the WSGI environ (which is its ``META``).

    ``get_host``, ``scheme`` and ``is_secure`` are Django's own ``HttpRequest`` methods
    on the same ``META``; ``body`` reads as Django's does, with its ``DATA_UPLOAD_MAX_MEMORY_SIZE``.
    """

    # ``label`` and ``layers``: the answer's metrics label and the middleware whose headers it gets.
    __slots__ = ("META", "method", "path_info", "content_type", "content_params", "_body", "label", "layers")

    get_host = HttpRequest.get_host
    _get_raw_host = HttpRequest._get_raw_host
    get_port = HttpRequest.get_port
    scheme = HttpRequest.scheme
    is_secure = HttpRequest.is_secure

    def __init__(self, environ, content_type, content_params):
        self.META = environ
        self.method = environ["REQUEST_METHOD"].upper()
        self.path_info = environ["PATH_INFO"]
        self.content_type, self.content_params = content_type, content_params
        self._body = None

    # The lane takes no request with a query string (``route_of``): a GET route's query is empty.
    GET = QueryDict(encoding="utf-8")

    def _get_scheme(self):
        return self.META.get("wsgi.url_scheme")

    @property
    def path(self):
        return f"{get_script_name(self.META).rstrip('/')}{self.path_info}"

    @property
    def body(self):
        if self._body is None:
            # ``body_size_refusal`` has refused a length that is not a number, or none (chunked), before this.
            length = declared_length(self.META)
            if settings.DATA_UPLOAD_MAX_MEMORY_SIZE is not None and length > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
                raise RequestDataTooBig("Request body exceeded settings.DATA_UPLOAD_MAX_MEMORY_SIZE.")
            self._body = self.META["wsgi.input"].read(length) if length > 0 else b""
        return self._body


class Route:
    """A lane route: its view (one instance answers every request), its URL name, whether https is forced on it."""

    def __init__(self, view, name, redirects):
        self.view, self.name, self.redirects = view, name, redirects


def lane_routes(urlconf=None):
    """``{path: Route}`` of every plain path (no converters) the URLconf serves with a ``HotWriteView``."""
    routes = {}
    exempt = [re.compile(pattern) for pattern in settings.SECURE_REDIRECT_EXEMPT]

    def walk(patterns, prefix):
        for entry in patterns:
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, prefix + str(entry.pattern))
            elif isinstance(entry, URLPattern) and not entry.pattern.converters:
                view_class = getattr(entry.callback, "view_class", None)
                if isinstance(view_class, type) and issubclass(view_class, HotWriteView):
                    route = prefix + str(entry.pattern)
                    redirects = settings.SECURE_SSL_REDIRECT and not any(p.search(route) for p in exempt)
                    view = view_class(**entry.callback.view_initkwargs)
                    routes.setdefault("/" + route, Route(view, entry.name or route, redirects))

    walk(get_resolver(urlconf).url_patterns, "")
    return routes


def lane_headers(secure):
    """``{layer: [(name, value)]}``: what SecurityMiddleware and XFrameOptionsMiddleware add to an answer that
    has none of their headers, over https or not; rendered once, by those middleware, on an empty answer."""

    class Probe:
        def is_secure(self):
            return secure

    def added(middleware):
        probe = HttpResponse()
        middleware(lambda request: probe).process_response(Probe(), probe)
        return [(name, value) for name, value in probe.items() if name != "Content-Type"]

    return {"security": added(SecurityMiddleware), "xframe": added(XFrameOptionsMiddleware)}


def check_middleware():
    """Every middleware of ``settings.MIDDLEWARE`` is one the lane stands for or one that steps aside."""
    unknown = [path for path in settings.MIDDLEWARE if path not in STANDS_FOR | STEPS_ASIDE]
    if unknown:
        raise ImproperlyConfigured(f"The hot lane does not know what {', '.join(unknown)} would do to its routes")


def receivers(signal):
    """The functions connected to ``signal`` now (sync ones: a WSGI server's)."""
    return tuple(signal._live_receivers(HotLane)[0])


class Receivers:
    """A signal's receivers, read again only when something connects or disconnects (a list comparison of a few
    entries, against the signal's dispatch per request): a test that keeps its connection open disconnects
    ``close_old_connections``, as Django's own test client does, and the lane must honour that too."""

    def __init__(self, signal):
        self.signal = signal
        self.seen = None
        self.functions = ()

    def __call__(self):
        if self.signal.receivers != self.seen:
            self.seen = list(self.signal.receivers)
            self.functions = receivers(self.signal)
        return self.functions


class LaneBody(list):
    """The WSGI body: one chunk; ``close()`` (called by the server once it is sent) runs ``request_finished``'s receivers."""

    __slots__ = ("finished",)

    def close(self):
        for receiver in self.finished():
            receiver(signal=signals.request_finished, sender=HotLane)


class HotLane:
    """The WSGI application: the hot writes here, every other request to ``django`` (Django's WSGIHandler)."""

    def __init__(self, django, urlconf=None):
        check_middleware()
        self.django = django
        self.routes = lane_routes(urlconf)
        # Configurations where Django's answer would be richer than the lane's: Django answers all.
        self.off = bool(settings.DEBUG or settings.PREPEND_WWW or settings.DISALLOWED_USER_AGENTS)
        self.headers = {secure: lane_headers(secure) for secure in (False, True)}
        self.on_started, self.on_finished = Receivers(signals.request_started), Receivers(signals.request_finished)
        self.known_hosts = set()
        self.forwarded_host = settings.USE_X_FORWARDED_HOST
        self.security_log = logging.getLogger("django.security.DisallowedHost")

    def route_of(self, environ):
        """The route and the parsed content type, or None when Django answers this request."""
        route = self.routes.get(environ.get("PATH_INFO"))
        if route is None or self.off or environ.get("HTTP_COOKIE") or environ.get("QUERY_STRING"):
            return None
        content_type = parse_header_parameters(environ.get("CONTENT_TYPE", ""))
        if content_type[0] in FORM_TYPES:
            return None
        return route, content_type

    def __call__(self, environ, start_response):
        taken = self.route_of(environ)
        if taken is None:
            return self.django(environ, start_response)
        route, (content_type, params) = taken
        request = LaneRequest(environ, content_type, params)
        if route.redirects and not request.is_secure():
            return self.django(environ, start_response)
        for receiver in self.on_started():
            receiver(signal=signals.request_started, sender=HotLane, environ=environ)
        started = time.perf_counter()
        response = answered_watching_recovery(self._answer, route, request)
        count_answer(request.label, request.method, response.status_code, started)
        if response.status_code >= 400:  # as Django's BaseHandler.get_response logs them
            log_response("%s: %s", response.reason_phrase, request.path, response=response, request=request)
        headers = list(response.items())
        if request.layers:
            self._add_headers(headers, response, request)
        start_response(f"{response.status_code} {response.reason_phrase}", headers)
        body = LaneBody((response.content,))
        body.finished = self.on_finished
        return body

    def _answer(self, route, request):
        """The middleware's rules, then the view's; says in ``request`` how to label it and which headers it gets."""
        request.label, request.layers = UNMATCHED, ()
        refusal = body_size_refusal(request.META)
        if refusal is not None:  # before the URL is resolved and before the headers' middleware
            return refusal
        request.layers = ("security",)
        refusal = self._host_refusal(request)
        if refusal is not None:
            return refusal
        request.label, request.layers = route.name, ("xframe", "common", "security")
        try:
            return answer_write(route.view, request)
        except Exception as exc:  # noqa: BLE001 - as Django's convert_exception_to_response
            return self._server_error(request, exc)

    def _host_refusal(self, request):
        """CommonMiddleware's ``get_host()``: None for an allowed ``Host:``, else Django's ``handler400`` answer,
        logged as Django logs it (one ``django.security.DisallowedHost`` line)."""
        host = request.META.get("HTTP_HOST")
        if host in self.known_hosts and not self.forwarded_host:
            return None
        try:
            request.get_host()
        except DisallowedHost as exc:
            response = errors.bad_request(request, exc)
            log_response(str(exc), exception=exc, request=request, response=response, level="error",
                         logger=self.security_log)
            return response
        if host is not None and len(self.known_hosts) < KNOWN_HOSTS:
            self.known_hosts.add(host)
        return None

    def _server_error(self, request, exc):
        """What Django answers to an exception from a view: ``handler500`` (the outage's 503), logged."""
        signals.got_request_exception.send(sender=None, request=request)
        response = errors.server_error(request)
        log_response("%s: %s", response.reason_phrase, request.path, response=response, request=request,
                     exception=exc)
        return response

    def _add_headers(self, headers, response, request):
        """Each layer's headers the answer does not carry yet, innermost middleware first, as Django adds them.

        What it carries is read once from ``headers`` (its own, as a set of lower-cased names): asking the
        response for each name, one ``KeyError`` per absent header, cost more than the rest of this."""
        rendered = self.headers[request.is_secure()]
        present = {name.lower() for name, _ in headers}
        for layer in request.layers:
            if layer == "common":
                if "content-length" not in present:
                    headers.append(("Content-Length", str(len(response.content))))
            elif layer != "xframe" or not getattr(response, "xframe_options_exempt", False):
                headers.extend((name, value) for name, value in rendered[layer] if name.lower() not in present)

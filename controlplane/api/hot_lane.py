"""The hot lane: the WSGI callable ``up`` serves, answering the hot writes below Django's request machinery.

An agent's snapshot and heartbeat are nearly all of a Proxy's requests (and a router's
placement asks and feedback most of the rest), and
Django's floor (a full ``WSGIRequest``, fourteen middleware, the URL
resolver) cost about as much as the work of storing one (bench/README.md).
For every path served by a ``HotWriteView`` the hot lane does, in order:

1. Looks the path up in its route table: every URL pattern of the URLconf
   whose view is a ``HotWriteView`` (``lane_routes``), so a hot write joins
   the hot lane by being one in a ``urls.py``. Any other path, and any request
   the skipped middleware could act on (a cookie, a query string, a form
   body), goes to Django as it is (``hands_over``).
2. Builds a ``HotLaneRequest``: Django's own request class, filled with only
   what those views read (its body, size limit and host checks are Django's).
3. Runs the middleware of ``settings.MIDDLEWARE`` that act on such a request
   (the request metrics, the database outage, the body limit, the security
   headers), the same classes in the same order, wrapped as Django wraps them
   (an exception is Django's answer to it: the outage 503, the envelope's 500),
   around the route's view, the very one Django would call; logs an error
   answer as Django does.

So there is one implementation of every rule, and the hot lane cannot answer
otherwise than Django would: ``tests/controlplane/test_hot_lane.py`` and the
endpoints' own tests, run through both entry points (``tests/hot_lane.py``),
hold it to that.
"""

from django.conf import settings
from django.core import signals
from django.core.exceptions import ImproperlyConfigured
from django.core.handlers.exception import convert_exception_to_response
from django.core.handlers.wsgi import LimitedStream, get_script_name
from django.http import HttpRequest
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import ResolverMatch
from django.utils.http import parse_header_parameters
from django.utils.log import log_response
from django.utils.module_loading import import_string

from controlplane.api.hot_path import HotWriteView
from controlplane.api.middleware import FORM_TYPES

# Middleware that can do nothing to a request the hot lane keeps, and why; every other one runs on the hot lane.
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


class HotLaneRequest(HttpRequest):
    """Django's request, filled with what a ``HotWriteView`` and the hot lane's middleware read.

    ``HttpRequest.__init__`` builds five QueryDicts and ``WSGIRequest``'s
    parses more; a hot write reads none of them. ``body``, ``get_host`` and
    ``is_secure`` are Django's own, on the same ``META``.
    """

    def __init__(self, environ, match, content_type, content_params):
        script_name = get_script_name(environ)
        self.environ = self.META = environ
        self.path_info = environ["PATH_INFO"]
        self.path = f"{script_name.rstrip('/')}{self.path_info}"
        self.method = environ["REQUEST_METHOD"].upper()
        self.content_type, self.content_params = content_type, content_params
        self.resolver_match = match
        self.COOKIES = {}
        try:
            content_length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            content_length = 0  # BodySizeLimitMiddleware answers it
        self._stream = LimitedStream(environ["wsgi.input"], content_length)
        self._read_started = False

    def _get_scheme(self):
        return self.environ.get("wsgi.url_scheme")


def lane_routes(urlconf=None):
    """``{path: ResolverMatch}`` of every plain path (no converters) the URLconf serves with a ``HotWriteView``."""
    routes = {}

    def walk(patterns, prefix):
        for entry in patterns:
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, prefix + str(entry.pattern))
            elif isinstance(entry, URLPattern) and not entry.pattern.converters:
                view_class = getattr(entry.callback, "view_class", None)
                if isinstance(view_class, type) and issubclass(view_class, HotWriteView):
                    route = prefix + str(entry.pattern)
                    routes.setdefault("/" + route, ResolverMatch(entry.callback, (), {}, entry.name, route=route))

    walk(get_resolver(urlconf).url_patterns, "")
    return routes


def lane_middleware():
    """The middleware of ``settings.MIDDLEWARE`` the hot lane runs: every one not in ``STEPS_ASIDE``."""
    classes = [import_string(path) for path in settings.MIDDLEWARE if path not in STEPS_ASIDE]
    for cls in classes:
        hooks = [name for name in ("process_view", "process_exception", "process_template_response")
                 if hasattr(cls, name)]
        if hooks:  # the hot lane calls the view itself, so it would skip them
            raise ImproperlyConfigured(f"{cls.__name__} has {', '.join(hooks)}: the hot lane cannot run it")
    return classes


def hands_over(environ):
    """Whether a request to a lane route goes to Django instead, and else its content type."""
    if environ.get("HTTP_COOKIE") or environ.get("QUERY_STRING"):
        return True, None
    content_type = parse_header_parameters(environ.get("CONTENT_TYPE", ""))
    return content_type[0] in FORM_TYPES, content_type


def _call_view(request):
    return request.resolver_match.func(request)


class HotLane:
    """The WSGI application: the hot writes here, every other request to ``django`` (Django's WSGIHandler)."""

    def __init__(self, django, urlconf=None):
        self.django = django
        self.routes = lane_routes(urlconf)
        chain = convert_exception_to_response(_call_view)
        for cls in reversed(lane_middleware()):
            chain = convert_exception_to_response(cls(chain))
        self._chain = chain

    def takes(self, environ):
        """The route's match and the content type, or None when Django answers this request."""
        match = self.routes.get(environ.get("PATH_INFO"))
        if match is None:
            return None
        handed_over, content_type = hands_over(environ)
        return None if handed_over else (match, content_type)

    def __call__(self, environ, start_response):
        taken = self.takes(environ)
        if taken is None:
            return self.django(environ, start_response)
        signals.request_started.send(sender=self.__class__, environ=environ)
        request = HotLaneRequest(environ, taken[0], *taken[1])
        response = self._chain(request)
        if response.status_code >= 400:  # as Django's BaseHandler.get_response logs them
            log_response("%s: %s", response.reason_phrase, request.path, response=response, request=request)
        response._resource_closers.append(request.close)
        status = f"{response.status_code} {response.reason_phrase}"
        start_response(status, [*response.items(),
                                *(("Set-Cookie", c.output(header="")) for c in response.cookies.values())])
        return response  # its close(), called by the server, sends request_finished

"""Request guards that apply to every endpoint."""

import django_htmx.middleware
import whitenoise.middleware
from django.conf import settings
from django.contrib.auth import middleware as auth_middleware
from django.contrib.messages import middleware as messages_middleware

from controlplane.api import errors
from controlplane.api.body_length import CHUNKED, declared_length

NUL = "\x00"
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


class NulCharacterMiddleware:
    """Refuse a NUL character in any text of a request before a view or a query sees it.

    PostgreSQL cannot store or even compare text with NUL in it (a query with
    one fails with a DataError, a 500), SQLite can; refusing it here makes
    both databases answer alike, for the API, the pages and the admin. A NUL
    in the path is a 404 (no id has one), in a query or form value or name a
    400 ``validation_error``; a cookie with one is dropped, as a browser's
    garbage cookie would be. JSON bodies are checked by their parser
    (``controlplane.api.parsers``). The common case costs two substring tests.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if NUL in request.path_info:
            return errors.not_found()
        query = request.META.get("QUERY_STRING", "")
        if ("%00" in query or NUL in query) and (field := nul_field(request.GET)):
            return nul_refused(field)
        if request.content_type in FORM_TYPES:
            # The body read first, so it stays readable: parsing a multipart
            # form straight from the stream would leave request.body unreadable
            # for a view that reads it raw (the hot path's), a 500. The size
            # limit above has already refused a body too large to hold.
            request.body  # noqa: B018 - read for its side effect, the cached body
            if field := nul_field(request.POST):
                return nul_refused(field)
        if request.META.get("HTTP_COOKIE"):  # a quoted cookie may spell NUL as \000
            for name in [name for name, value in request.COOKIES.items() if NUL in name or NUL in value]:
                del request.COOKIES[name]
        return self.get_response(request)


def nul_field(values):
    """The name of the first field of a QueryDict whose name or any value holds a NUL, else None."""
    for name, items in values.lists():
        if NUL in name or any(NUL in item for item in items):
            return name.replace(NUL, "\\x00") or "query"
    return None


def nul_refused(field):
    return errors.validation_error({field: ["NUL characters are not allowed."]})


class BodySizeLimitMiddleware:
    """Answer 413 in the SPEC envelope before a too-large body is read, and 411 to a body without a length.

    A declared Content-Length over the limit is refused at once. A chunked
    body (no Content-Length) is refused with 411: neither Django nor the hot
    lane reads one (WSGI reads Content-Length bytes), and an unread body
    must never be answered as if it were empty.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return body_size_refusal(request.META) or self.get_response(request)


def body_size_refusal(meta):
    """The answer to a request whose declared body is too large, not a number or not declared (chunked), else
    None (``BodySizeLimitMiddleware``'s rule, and the hot lane's)."""
    try:
        length = declared_length(meta)
    except ValueError:
        return errors.validation_error({"body": ["Content-Length is not a number."]})
    if length is CHUNKED:
        return errors.length_required()
    limit = body_limit(meta.get("PATH_INFO"))
    if length > limit:
        return errors.payload_too_large(limit)
    return None


# Paths whose bodies may be larger than FLEETWATCH_MAX_BODY_BYTES, and the setting that says how large: those
# that carry a prompt or block keys (SPEC 15.3: two lists of 16,384 int64 keys are up to ~700 KB as JSON).
LARGE_BODY_PATHS = {"/v1/placement": "FLEETWATCH_PREFIX_MAX_BODY_BYTES",
                    "/v1/instance/prefix_blocks": "FLEETWATCH_PREFIX_MAX_BODY_BYTES"}


# Path prefixes with a limit of their own: an agent's upload of one tokenizer file (SPEC 16.2: up to 64 MiB).
LARGE_BODY_PREFIXES = {"/v1/instance/tokenizer/": "FLEETWATCH_TOKENIZER_MAX_BODY_BYTES"}


def body_limit(path):
    """The body limit of ``path``: FLEETWATCH_MAX_BODY_BYTES, or a larger path's own (a placement with a prompt)."""
    name = LARGE_BODY_PATHS.get(path)
    if name is None and path:
        name = next((name for prefix, name in LARGE_BODY_PREFIXES.items() if path.startswith(prefix)), None)
    return settings.FLEETWATCH_MAX_BODY_BYTES if name is None else getattr(settings, name)


# --- the API lane ------------------------------------------------------------------------
#
# The logged-in user, messages, htmx and static files serve the pages and
# the admin. An agent's report carries a bearer
# token and no cookie, and running that middleware for it cost a fifth of a
# small request (bench/README.md). A request to an API path without a
# session cookie takes the lane: those middleware step aside for it. With a
# session cookie (a staff user reading the API in a browser) nothing changes.

API_PREFIXES = ("/v1/", "/debug/", "/healthz", "/metrics", "/api/schema/")


def takes_api_lane(request):
    return request.path_info.startswith(API_PREFIXES) and settings.SESSION_COOKIE_NAME not in request.COOKIES


class ApiLaneMiddleware:
    """Decides once per request whether the page-only middleware below step aside."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.api_lane = takes_api_lane(request)
        return self.get_response(request)


class PageOnly:
    """Put before a page middleware's own class: on the API lane it steps aside, else it runs as written.

    Each one below is a subclass of the middleware it wraps, declared here,
    so Django's checks (the admin's looks for the authentication and message
    middleware) find what they look for.
    """

    def __call__(self, request):
        if getattr(request, "api_lane", False):
            return self.get_response(request)
        return super().__call__(request)


class WhiteNoiseMiddleware(PageOnly, whitenoise.middleware.WhiteNoiseMiddleware):
    """WhiteNoise's static files (the pages' and the admin's), for pages only."""


class AuthenticationMiddleware(PageOnly, auth_middleware.AuthenticationMiddleware):
    """Django's logged-in user, for pages only; an API call is authenticated by its view."""


class MessageMiddleware(PageOnly, messages_middleware.MessageMiddleware):
    """Django's messages (the agent page's notices), for pages only."""


class HtmxMiddleware(PageOnly, django_htmx.middleware.HtmxMiddleware):
    """django-htmx's ``request.htmx``, for pages only."""

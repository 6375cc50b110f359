"""Request guards that apply to every endpoint."""

from django.conf import settings
from django.utils.module_loading import import_string

from controlplane.api import errors


class BodySizeLimitMiddleware:
    """Answer 413 in the SPEC envelope before a too-large body is read.

    A declared Content-Length over the limit is refused at once; a body
    without one (chunked) is caught by Django's DATA_UPLOAD_MAX_MEMORY_SIZE,
    which the API's exception handler turns into the same 413.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        declared = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(declared)
        except ValueError:
            return errors.validation_error({"body": ["Content-Length is not a number."]})
        if length > settings.FLEETWATCH_MAX_BODY_BYTES:
            return errors.payload_too_large()
        return self.get_response(request)


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


class _PageOnly:
    def __call__(self, request):
        if getattr(request, "api_lane", False):
            return self.get_response(request)
        return super().__call__(request)


def page_only(middleware_class):
    """``middleware_class``, stepping aside on the API lane (a subclass, so Django's checks still see it)."""
    return type(middleware_class.__name__, (_PageOnly, middleware_class), {
        "__module__": __name__, "__qualname__": middleware_class.__name__,
        "__doc__": f"{middleware_class.__module__}.{middleware_class.__name__}, for pages only.",
    })


WhiteNoiseMiddleware = page_only(import_string("whitenoise.middleware.WhiteNoiseMiddleware"))
AuthenticationMiddleware = page_only(import_string("django.contrib.auth.middleware.AuthenticationMiddleware"))
MessageMiddleware = page_only(import_string("django.contrib.messages.middleware.MessageMiddleware"))
HtmxMiddleware = page_only(import_string("django_htmx.middleware.HtmxMiddleware"))

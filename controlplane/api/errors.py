"""The error envelope of SPEC section 1, built in one place.

Every error any endpoint answers, from the middleware, a view, DRF or Django's
own 404 and 500 handlers, is made by ``error_response``.
"""

import sys

from django.conf import settings
from django.core.exceptions import DisallowedHost, RequestDataTooBig
from django.http import JsonResponse
from rest_framework import exceptions

from controlplane.api import outage
from controlplane.api.route_gate import RouteBusy


def error_body(error, detail=None):
    body = {"ok": False, "error": error}
    if detail is not None:
        body["detail"] = detail
    return body


def error_response(status, error, detail=None, headers=None):
    return JsonResponse(error_body(error, detail), status=status, headers=headers)


def validation_error(detail):
    """400 ``validation_error`` with ``detail`` as ``{field: [message]}``."""
    return error_response(400, "validation_error", detail)


def flatten_detail(detail, path=""):
    """DRF's nested errors as the flat ``{field: [message]}`` of SPEC 1.

    A nested field is named by its path: ``capabilities.kv_cache.block_size``,
    ``tags[0]``, ``capabilities.adapters[1].identifier``.
    """
    if isinstance(detail, dict):
        flat = {}
        for key, value in detail.items():
            if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
                child = f"{path}[{key}]"
            elif key == "" or (isinstance(key, str) and key.startswith("[")):
                child = f"{path}{key}"
            else:
                child = f"{path}.{key}" if path else str(key)
            flat.update(flatten_detail(value, child))
        return flat
    if isinstance(detail, list) and detail and all(isinstance(item, (dict, list)) for item in detail):
        # A list field whose items carry their own errors: DRF answers a list aligned with the items.
        flat = {}
        for index, item in enumerate(detail):
            if item:
                flat.update(flatten_detail(item, f"{path}[{index}]"))
        return flat
    messages = detail if isinstance(detail, list) else [detail]
    return {path or "body": [str(message) for message in messages]}


def payload_too_large(limit=None):
    """413: the body is left unread, so the connection cannot carry another request; say so, or a
    keep-alive client would send its next request into a connection the server is closing."""
    limit = settings.FLEETWATCH_MAX_BODY_BYTES if limit is None else limit
    return error_response(413, "payload_too_large", {"body": [f"Request body is larger than {limit} bytes."]},
                          headers={"Connection": "close"})


def length_required():
    """411: a body sent chunked, without a Content-Length, is not read (``controlplane.api.body_length``); it is
    left unread, so the connection closes after the answer, as after a 413."""
    return error_response(411, "length_required", {"body": ["Send the body with a Content-Length, not chunked."]},
                          headers={"Connection": "close"})


def not_found(request=None, exception=None):
    """Django's ``handler404`` and any unknown path."""
    return error_response(404, "not_found")


def bad_request(request=None, exception=None):
    """Django's ``handler400`` (a disallowed ``Host:``, a malformed request): the envelope, not an HTML page."""
    if isinstance(exception, DisallowedHost):
        return validation_error({"Host": ["Not a name this server answers to (DJANGO_ALLOWED_HOSTS)."]})
    return validation_error({"request": ["Malformed request."]})


def server_error(request=None):
    """Django's ``handler500``: an answer in the envelope should anything slip through.

    An unavailable database is not a server error but a 503 (``controlplane.api.outage``).
    """
    exc = sys.exc_info()[1]
    if exc is not None and outage.is_database_unavailable(exc):
        outage.OUTAGE.failed(exc)
        return database_unavailable()
    return error_response(500, "internal_error")


def database_unavailable():
    """503 ``database_unavailable`` with ``Retry-After``; marked as logged, since the outage is logged once."""
    response = error_response(503, "database_unavailable", headers={"Retry-After": str(outage.RETRY_AFTER_S)})
    response._has_been_logged = True  # Django would log each one with its traceback
    return response


def unauthorized():
    """401 of SPEC 10: no token, or one that is malformed, unknown or revoked."""
    return error_response(401, "unauthorized", headers={"WWW-Authenticate": "Bearer"})


def forbidden(detail=None):
    """403 of SPEC 10: a valid token of the wrong scope, or for another instance; ``detail`` says what was needed
    (``controlplane.api.auth.refusal_detail``)."""
    return error_response(403, "forbidden", detail)


def rate_limited(retry_after_s):
    return error_response(
        429, "rate_limited", {"body": [f"Too many writes; retry in {retry_after_s} s."]},
        headers={"Retry-After": str(retry_after_s)},
    )


def route_busy(retry_after_s):
    """429 of the route lane's gate (``controlplane.api.route_gate``): this process gave routing its share."""
    return error_response(
        429, "route_busy", {"body": [f"Too many placement and feedback requests at once; retry in {retry_after_s} s."]},
        headers={"Retry-After": str(retry_after_s)},
    )


def envelope_exception_handler(exc, context):
    """DRF's exception handler: every API exception as ``{"ok": false, "error", "detail"}``."""
    if isinstance(exc, (exceptions.NotAuthenticated, exceptions.AuthenticationFailed)):
        return unauthorized()
    if isinstance(exc, exceptions.PermissionDenied):
        return forbidden(flatten_detail(exc.detail) if isinstance(exc.detail, dict) else None)
    if isinstance(exc, RouteBusy):
        return route_busy(int(exc.wait or 1))
    if isinstance(exc, exceptions.Throttled):
        return rate_limited(int(exc.wait or 1))
    if isinstance(exc, RequestDataTooBig):
        return payload_too_large()
    if isinstance(exc, exceptions.ParseError):
        return validation_error({"body": [str(exc.detail)]})
    if isinstance(exc, exceptions.ValidationError):
        return validation_error(flatten_detail(exc.detail))
    if isinstance(exc, exceptions.APIException):
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else exc.default_code
        return error_response(exc.status_code, code, flatten_detail(exc.detail))
    return None

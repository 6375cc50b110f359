"""The error envelope of SPEC section 1, built in one place.

Every error any endpoint answers, from the middleware, a view, DRF or Django's
own 404 and 500 handlers, is made by ``error_response``.
"""

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse
from rest_framework import exceptions


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


def payload_too_large():
    limit = settings.FLEETWATCH_MAX_BODY_BYTES
    return error_response(413, "payload_too_large", {"body": [f"Request body is larger than {limit} bytes."]})


def not_found(request=None, exception=None):
    """Django's ``handler404`` and any unknown path."""
    return error_response(404, "not_found")


def server_error(request=None):
    """Django's ``handler500``: an answer in the envelope should anything slip through."""
    return error_response(500, "internal_error")


def envelope_exception_handler(exc, context):
    """DRF's exception handler: every API exception as ``{"ok": false, "error", "detail"}``."""
    if isinstance(exc, RequestDataTooBig):
        return payload_too_large()
    if isinstance(exc, exceptions.ParseError):
        return validation_error({"body": [str(exc.detail)]})
    if isinstance(exc, exceptions.ValidationError):
        detail = exc.detail
        if not isinstance(detail, dict):
            detail = {"body": detail if isinstance(detail, list) else [detail]}
        return validation_error(detail)
    if isinstance(exc, exceptions.APIException):
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else exc.default_code
        return error_response(exc.status_code, code, {"body": [str(exc.detail)]})
    return None

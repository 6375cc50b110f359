"""The error envelope of SPEC section 1, built in one place."""

from django.http import JsonResponse


def error_body(error, detail=None):
    body = {"ok": False, "error": error}
    if detail is not None:
        body["detail"] = detail
    return body


def error_response(status, error, detail=None):
    return JsonResponse(error_body(error, detail), status=status)

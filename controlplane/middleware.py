"""Request guards that apply to every endpoint."""

from django.conf import settings

from controlplane import errors


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

"""The agents' tokenizer files (SPEC 16.2 (b)): ``POST /v1/instance/tokenizer`` offers a model's files by
digest, ``PUT /v1/instance/tokenizer/<sha256>`` uploads one the Proxy lacks. Both scope ``instance``;
``proxy_app.tokenizers.store`` does the rest."""

from django.core.exceptions import RequestDataTooBig
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import exceptions

from controlplane import clock
from controlplane.api.fields import BodyChecks
from controlplane.api.hot_path import HotWriteView, json_response, ok_response
from proxy_app.api.openapi.tokenizers import (
    SHA256_PARAMETER,
    TokenizerOfferSerializer,
    tokenizer_file_schema,
    tokenizer_offer_schema,
)
from proxy_app.api.reports import UNKNOWN_INSTANCE_ANSWER
from proxy_app.tokenizers import store
from proxy_app.tokenizers.files import MAX_FILE_BYTES, is_digest

TOKENIZER_OFFER_BODY = BodyChecks(TokenizerOfferSerializer)
OCTET_STREAM = "application/octet-stream"
NOT_OFFERED = "No offer names this digest: offer the model's files first."
MISMATCH = "The body's SHA-256 is not the digest in the path."


@extend_schema_view(post=tokenizer_offer_schema)
class TokenizerOfferView(HotWriteView):
    """``POST /v1/instance/tokenizer``: a model's tokenizer files by digest; the answer names those missing."""

    write_scope = "instance"
    rate_limited = False  # once per model at start and when what the engine serves changes

    def respond(self, data, grant):
        data = TOKENIZER_OFFER_BODY(data)
        missing = store.offer(data["instance_id"], data["model"], data["files"], clock.now())
        if missing is None:
            return json_response(UNKNOWN_INSTANCE_ANSWER)
        return json_response({"ok": True, "missing": missing})


@extend_schema_view(put=[tokenizer_file_schema, extend_schema(parameters=[SHA256_PARAMETER])])
class TokenizerFileView(HotWriteView):
    """``PUT /v1/instance/tokenizer/<sha256>``: one file's bytes, checked against the digest, stored once."""

    write_scope = "instance"
    http_method = "PUT"
    http_method_names = [name for name in HotWriteView.http_method_names if name != "post"]  # for the schema
    rate_limited = False

    def dispatch(self, request, *args, **kwargs):
        self.sha256 = kwargs["sha256"]
        return super().dispatch(request, *args, **kwargs)

    def put(self, request, sha256):
        """What the schema describes; dispatch answers through ``respond``."""
        return self.respond(self.request_data(request), request.auth)

    def request_data(self, request):
        """The body's bytes, read after the token was checked; a larger body than a file may be is a 413
        (``BodySizeLimitMiddleware`` refuses a declared one before it is read)."""
        data = request.read(MAX_FILE_BYTES + 1)
        if data and request.content_type != OCTET_STREAM:  # as DRF: an empty body is no data, whatever its type
            raise exceptions.UnsupportedMediaType(request.content_type)
        if len(data) > MAX_FILE_BYTES:  # only without a declared length: the middleware refuses a declared one
            raise RequestDataTooBig()
        return data

    def respond(self, data, grant):
        if not is_digest(self.sha256):
            raise exceptions.ValidationError({"sha256": ["Not a SHA-256 as 64 lowercase hexadecimal characters."]})
        outcome = store.put_file(self.sha256, data, clock.now())
        if outcome is store.Stored.NOT_OFFERED:
            # A 404, not a 400: the request is well formed, the digest is just not one this Proxy asked for.
            raise exceptions.NotFound(NOT_OFFERED)
        if outcome is store.Stored.MISMATCH:
            raise exceptions.ValidationError({"sha256": [MISMATCH]})
        return ok_response()

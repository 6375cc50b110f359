"""``POST /v1/instance/tokenizer`` and ``PUT /v1/instance/tokenizer/{sha256}`` (SPEC 16.2) as OpenAPI."""

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.utils import OpenApiExample, OpenApiParameter
from rest_framework import serializers

from controlplane.api.fields import StrictCharField
from controlplane.api.schema.errors import NOT_FOUND
from controlplane.api.schema.operations import write_operation
from controlplane.endpoints.models import NAME_LENGTH
from proxy_app.api.openapi import INSTANCES
from proxy_app.api.openapi.answers import or_unknown_instance
from proxy_app.tokenizers.files import MAX_FILE_BYTES, NAMES, is_digest

MODEL_LENGTH = 255
DIGEST_PATTERN = "^[0-9a-f]{64}$"
EXAMPLE_DIGEST = "5f2b0c5cfd4a2e3bc7d0e5c3a8f0d1b2c4e6f8a0b1c3d5e7f9a2b4c6d8e0f1a3"


class TokenizerFilesField(serializers.Field):
    """``{name: sha256}``: at least one of the tokenizer's file names (``proxy_app.tokenizers.files.NAMES``), each
    with its content's SHA-256 as 64 lowercase hexadecimal characters; any other name or digest is a 400."""

    default_error_messages = {
        "not_object": "Expected an object of file name -> SHA-256.",
        "empty": "Name at least one file.",
        "name": "{name!r} is not a tokenizer file; the names taken are " + ", ".join(NAMES) + ".",
        "digest": "The digest of {name!r} is not a SHA-256 as 64 lowercase hexadecimal characters.",
    }

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            self.fail("not_object")
        if not data:
            self.fail("empty")
        for name, digest in data.items():
            if name not in NAMES:
                self.fail("name", name=name[:80])
            if not is_digest(digest):
                self.fail("digest", name=name)
        return dict(data)

    def to_representation(self, value):
        return value


class TokenizerFilesScheme(OpenApiSerializerFieldExtension):
    target_class = "proxy_app.api.openapi.tokenizers.TokenizerFilesField"

    def map_serializer_field(self, auto_schema, direction):
        digest = {"type": "string", "pattern": DIGEST_PATTERN}
        return {"type": "object", "properties": {name: digest for name in NAMES}, "additionalProperties": False,
                "minProperties": 1, "description": "File name -> the SHA-256 of its content (hex)."}


class TokenizerOfferSerializer(serializers.Serializer):
    """The offer (SPEC 16.2): the schema's and the view's one declaration (``BodyChecks``)."""

    instance_id = StrictCharField(max_length=NAME_LENGTH)
    model = StrictCharField(max_length=MODEL_LENGTH, help_text="The served base model's id (its engine's "
                                                               "/v1/models).")
    files = TokenizerFilesField(help_text="The tokenizer's files in the model's directory, by name.")


class TokenizerMissing(serializers.Serializer):
    ok = serializers.BooleanField(help_text="true: the offer was recorded.")
    missing = serializers.ListField(child=serializers.CharField(), help_text=(
        "The offered digests this Proxy does not hold: PUT each file's bytes to /v1/instance/tokenizer/{sha256}. "
        "Empty when it holds them all, or when FLEETWATCH_TOKENIZERS_FROM_AGENTS is off."))


class TokenizerFileStored(serializers.Serializer):
    ok = serializers.BooleanField(help_text="true: the file is stored (now, or already).")


TOKENIZER_OFFER_ANSWER = or_unknown_instance("TokenizerOfferAnswer", TokenizerMissing)

tokenizer_offer_schema = write_operation(
    "instance_tokenizer_offer", "Offer a model's tokenizer files", (
        "An agent offers the SHA-256 digests of a served base model's tokenizer files (only tokenizer.json, "
        "tokenizer_config.json, chat_template.jinja, chat_template.json and special_tokens_map.json; any other "
        "name, or a digest that is not 64 lowercase hexadecimal characters, is a 400 and nothing is stored). "
        "The offer replaces the instance's earlier one for that model; the answer lists the digests the Proxy "
        "lacks. An unknown instance is answered **200** `{\"ok\": false, \"error\": \"unknown_instance\"}`. "
        "With FLEETWATCH_TOKENIZERS_FROM_AGENTS off the answer is `{\"ok\": true, \"missing\": []}` and "
        "nothing is stored."
    ), TokenizerOfferSerializer, {200: TOKENIZER_OFFER_ANSWER}, "instance", tags=INSTANCES,
    examples=[OpenApiExample("An offer", {"instance_id": "gpu-node-1", "model": "tiny",
                                          "files": {"tokenizer.json": EXAMPLE_DIGEST}}, request_only=True)],
)

tokenizer_file_schema = write_operation(
    "instance_tokenizer_file", "Upload one tokenizer file", (
        f"The bytes of a file an offer named, as `application/octet-stream`, at most {MAX_FILE_BYTES} bytes "
        "(a larger body is a 413). Stored once by content: bytes whose SHA-256 is not the path's digest, or a "
        "path that is not a digest, is a 400 and nothing is stored; a digest no offer names is a 404 (offer "
        "first; always so with FLEETWATCH_TOKENIZERS_FROM_AGENTS off); a file stored before is answered as "
        "stored."
    ), {"application/octet-stream": {"type": "string", "format": "binary"}},
    {200: TokenizerFileStored, 404: NOT_FOUND}, "instance", tags=INSTANCES,
)
SHA256_PARAMETER = OpenApiParameter("sha256", {"type": "string", "pattern": DIGEST_PATTERN},
                                    OpenApiParameter.PATH,
                                    description="The SHA-256 of the file's content, as the offer named it.")

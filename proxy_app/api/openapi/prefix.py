"""``POST /v1/instance/prefix_blocks`` (SPEC 15.3) as OpenAPI."""

from django.conf import settings
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.utils import OpenApiExample
from rest_framework import serializers

from controlplane.api.fields import StrictBooleanField, StrictCharField, StrictIntegerField
from controlplane.api.schema.operations import write_operation
from controlplane.endpoints.models import NAME_LENGTH
from proxy_app.api.openapi import INSTANCES
from proxy_app.api.openapi.answers import or_unknown_instance
from proxy_app.api.serializers import INT64_MAX, INT64_MIN, IntegerListField

ENGINE_LENGTH = 256
MAX_KEYS = 16_384


class IntegerListScheme(OpenApiSerializerFieldExtension):
    """``proxy_app.api.serializers.IntegerListField``: an array of bounded integers (keys, token ids)."""

    target_class = "proxy_app.api.serializers.IntegerListField"
    match_subclasses = True  # TokenIdsField: the same array on the wire

    def map_serializer_field(self, auto_schema, direction):
        field = self.target
        items = {"type": "integer", "minimum": field.minimum, "maximum": field.maximum}
        if field.minimum < -(2**31) or field.maximum >= 2**31:
            items["format"] = "int64"
        schema = {"type": "array", "items": items, "maxItems": field.max_length}
        if field.allow_null:
            schema["nullable"] = True
        return schema


class BlockTokensField(StrictIntegerField):
    """The pool's block size B (``FLEETWATCH_PREFIX_BLOCK_TOKENS``, read when checked): any other is refused,
    naming B."""

    def check(self, value):
        value = self.run_validation(value)
        expected = settings.FLEETWATCH_PREFIX_BLOCK_TOKENS
        if value != expected:
            raise serializers.ValidationError(f"This pool's block size is {expected} tokens "
                                              f"(FLEETWATCH_PREFIX_BLOCK_TOKENS); expected {expected}.")
        return value


class BlockTokensScheme(OpenApiSerializerFieldExtension):
    target_class = "proxy_app.api.openapi.prefix.BlockTokensField"

    def map_serializer_field(self, auto_schema, direction):
        expected = settings.FLEETWATCH_PREFIX_BLOCK_TOKENS
        return {"type": "integer", "minimum": expected, "maximum": expected,
                "description": "The Proxy's FLEETWATCH_PREFIX_BLOCK_TOKENS; any other value is a 400 naming it."}


class PrefixBlocksSerializer(serializers.Serializer):
    """The body (SPEC 15.3): the schema's and the view's one declaration (``BodyChecks``)."""

    instance_id = StrictCharField(max_length=NAME_LENGTH)
    engine = StrictCharField(max_length=ENGINE_LENGTH, help_text="Which engine of the instance (the agent's name "
                                                                 "for it, e.g. its URL).")
    epoch = StrictIntegerField(min_value=0, max_value=INT64_MAX, help_text="A new value whenever the agent's set "
                                                                          "starts over.")
    seq = StrictIntegerField(min_value=0, max_value=INT64_MAX, help_text="+1 per body within an epoch.")
    block_tokens = BlockTokensField(min_value=1, max_value=INT64_MAX)
    reset = StrictBooleanField(required=False, default=False, help_text="Forget every key of this engine first.")
    added = IntegerListField(INT64_MIN, INT64_MAX, MAX_KEYS, required=False, default=list,
                             help_text="SPEC 15.1 keys the engine now holds (int64).")
    removed = IntegerListField(INT64_MIN, INT64_MAX, MAX_KEYS, required=False, default=list,
                               help_text="Keys it no longer holds (int64).")


class PrefixBlocksTaken(serializers.Serializer):
    ok = serializers.BooleanField(help_text="true: the body was taken (applied, or a retry of the last one).")
    resync = serializers.BooleanField(help_text="true: nothing was applied and the Proxy cannot vouch for its copy "
                                                "of this engine's keys (a seq gap, an unknown epoch without "
                                                "reset, a lost index): send the whole set with reset.")


PREFIX_BLOCKS_ANSWER = or_unknown_instance("PrefixBlocksAnswer", PrefixBlocksTaken)


prefix_blocks_schema = write_operation(
    "instance_prefix_blocks", "Which prompt blocks an engine holds", (
        "An agent's changes to the KV-cache blocks one engine of its instance holds, as SPEC 15.1 keys, "
        "for the pool's prefix index that cache-aware placement reads (docs/placement.md). `reset: true` "
        "forgets the engine's keys first, then adds `added`; otherwise the body applies when its `epoch` is the "
        "engine's and its `seq` the next one (the same `seq` again is taken as a retry). `block_tokens` other "
        "than FLEETWATCH_PREFIX_BLOCK_TOKENS is a 400 naming the expected value. An unknown instance is "
        "answered **200** `{\"ok\": false, \"error\": \"unknown_instance\"}`. Not rate limited."
    ), PrefixBlocksSerializer, {200: PREFIX_BLOCKS_ANSWER}, "instance", tags=INSTANCES,
    examples=[OpenApiExample("A delta", {"instance_id": "gpu-node-1", "engine": "http://127.0.0.1:8000",
                                         "epoch": 1733380000, "seq": 7, "block_tokens": 16,
                                         "added": [-5120894424329418147], "removed": []}, request_only=True)],
)

"""Request bodies of the proxy API (SPEC 3); the rows it answers with are built in ``proxy_app.api.listing``."""

from array import array

from rest_framework import serializers

from agent.capabilities import CapabilityError, full_view, parse_capabilities
from agent.prefix_keys import MAX_TOKEN_ID, token_bytes  # SPEC 15.1: a token is 4 bytes unsigned
from controlplane.api.fields import (
    BodyChecks,
    JSONObjectField,
    ObjectOrNull,
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
)
from controlplane.api.placement import PlacementBodyBase, optional_text
from controlplane.api.serializers import RegisterSerializerBase, entry_id_field
from controlplane.endpoints.models import NAME_LENGTH
from proxy_app.placement.fencing import OUTCOMES

FINGERPRINT_LENGTH = len("sha256:") + 64


class CapabilitiesField(serializers.Field):
    """The typed capabilities object of SPEC 3.2, validated into its canonical form."""

    def to_internal_value(self, data):
        return self.parse(data)

    @staticmethod
    def parse(data):
        """The canonical capabilities of ``data`` (not null), else a ``ValidationError``."""
        try:
            return parse_capabilities(data, path="")
        except CapabilityError as error:
            raise serializers.ValidationError(error.errors) from None

    def to_representation(self, value):
        return full_view(value)


class RegisterSerializer(RegisterSerializerBase):
    instance_id = entry_id_field(optional=True)
    # Absent or null clears the stored capabilities.
    capabilities = CapabilitiesField(required=False, allow_null=True, default=None)

    def validate(self, attrs):
        if not attrs.get("instance_id"):
            attrs["instance_id"] = f"hp_{attrs['host']}:{attrs['port']}"
            if len(attrs["instance_id"]) > NAME_LENGTH:
                raise serializers.ValidationError(
                    {"instance_id": [f"hp_{{host}}:{{port}} would be over {NAME_LENGTH} characters; send an instance_id."]}
                )
        return attrs


class InstanceIdSerializer(serializers.Serializer):
    instance_id = entry_id_field()


# --- placement (SPEC 14) ---------------------------------------------------------------

MAX_COUNT = 32
SESSION_KEY_LENGTH = 256


class IntegerListField(serializers.Field):
    """A JSON array of integers within bounds, checked in one pass (a prompt's 131,072 token ids through a
    ``ListField`` of ``IntegerField`` took a DRF field call each); ``bool`` is not an integer here."""

    def __init__(self, minimum, maximum, max_length, **kwargs):
        self.minimum, self.maximum, self.max_length = minimum, maximum, max_length
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        self.check_list(data)
        if data and not integers_within(data, self.minimum, self.maximum):
            raise self.out_of_range()
        return data

    check = to_internal_value

    def check_list(self, data):
        if not isinstance(data, list):
            raise serializers.ValidationError(f'Expected a list of items but got type "{type(data).__name__}".')
        self.check_length(len(data))

    def check_length(self, length):
        if length > self.max_length:
            raise serializers.ValidationError(f"Ensure this field has no more than {self.max_length} elements.")

    def out_of_range(self):
        return serializers.ValidationError(f"Each item must be an integer from {self.minimum} to {self.maximum}.")

    def to_representation(self, value):
        return value


class TokenIdsField(IntegerListField):
    """SPEC 15.5's ``prompt_token_ids``, valid as SPEC 15.1's packed bytes (4 a token, little-endian): the form its
    keys are computed from. A list is checked and packed in one pass (``agent._blocks``: ~0.006 ms for 4,096 ids
    against ~0.09 ms); the placement body's parser (``proxy_app.api.token_ids``) hands over an array it read as
    those bytes already (JSON has no bytes, so nothing else is)."""

    def __init__(self, max_length, **kwargs):
        super().__init__(0, MAX_TOKEN_ID, max_length, **kwargs)

    def to_internal_value(self, data):
        if isinstance(data, bytes):
            self.check_length(len(data) // 4)
            return data
        self.check_list(data)
        try:
            return token_bytes(data)
        except (TypeError, ValueError):
            raise self.out_of_range() from None

    check = to_internal_value

    def to_representation(self, value):
        return array("I", value).tolist()


# Bounds that are exactly a C type's range: packing the list into an ``array`` of that type checks every item's
# range in one pass in C (8,192 block keys: ~0.05 ms, against ~0.2 ms for min() and max()).
PACKED_RANGES = {(-(2**63), 2**63 - 1): "q"}


def integers_within(data, minimum, maximum):
    """Whether every item of ``data`` is an ``int`` (a ``bool`` is not) from ``minimum`` to ``maximum``: the types in
    one pass over the list (``map``), the range in another."""
    if set(map(type, data)) != {int}:
        return False
    code = PACKED_RANGES.get((minimum, maximum))
    if code is None:
        return min(data) >= minimum and max(data) <= maximum
    try:
        array(code, data)
    except OverflowError:
        return False
    return True


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_PROMPT_TOKENS = 131_072
MAX_PROMPT_KEYS = 8_192


class PromptField(serializers.Field):  # its schema: proxy_app.api.openapi.placement.PromptScheme
    """SPEC 16.3's ``prompt`` as OpenAI's completions take it: a string, token ids, or a batch of either (a list of
    several, keyed by its first item). Valid as ``str`` or as packed token ids (SPEC 15.1's packing)."""

    default_error_messages = {
        "invalid": "Expected a string, a list of token ids, or a list of strings or of token-id lists.",
        "empty": "A prompt batch needs at least one item.",
    }

    def __init__(self, **kwargs):
        self.token_ids = TokenIdsField(MAX_PROMPT_TOKENS)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if isinstance(data, str):
            return data
        if not isinstance(data, list):
            self.fail("invalid")
        if not data:
            self.fail("empty")
        first = data[0]
        if all(isinstance(item, str) for item in data):
            return first
        if all(isinstance(item, list) for item in data):
            return [self.token_ids.to_internal_value(item) for item in data][0]  # every item checked, as sent
        if all(type(item) is int for item in data):
            return self.token_ids.to_internal_value(data)
        self.fail("invalid")

    check = to_internal_value

    def to_representation(self, value):
        return value


class MessagesField(serializers.Field):  # its schema: proxy_app.api.openapi.placement.MessagesScheme
    """SPEC 16.3's ``messages``: OpenAI chat messages, each an object with a string ``role`` and a ``content`` that is
    a string, null, or a list of parts (objects with a string ``type``; a ``text`` part has a string ``text``)."""

    def to_internal_value(self, data):
        if not isinstance(data, list):
            raise serializers.ValidationError("Expected a list of messages.")
        if not data:
            raise serializers.ValidationError("A chat needs at least one message.")
        for n, message in enumerate(data):
            if not isinstance(message, dict):
                raise serializers.ValidationError(f"Message {n} is not an object.")
            if not isinstance(message.get("role"), str):
                raise serializers.ValidationError(f"Message {n} needs a string role.")
            content = message.get("content")
            if content is None or isinstance(content, str):
                continue
            if not isinstance(content, list):
                raise serializers.ValidationError(f"Message {n}: content must be a string, null or a list of parts.")
            for part in content:
                if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                    raise serializers.ValidationError(f"Message {n}: each part must be an object with a string type.")
                if part["type"] == "text" and not isinstance(part.get("text"), str):
                    raise serializers.ValidationError(f"Message {n}: a text part needs a string text.")
        return data

    check = to_internal_value

    def to_representation(self, value):
        return value


PROMPT_FORMS = ("prompt_token_ids", "prompt_block_keys", "prompt", "messages")


class PlacementSerializer(PlacementBodyBase):
    adapter = optional_text(255)
    prompt_tokens = StrictIntegerField(min_value=0, required=False, allow_null=True, default=None)
    max_tokens = StrictIntegerField(min_value=0, required=False, allow_null=True, default=None)
    session_key = optional_text(SESSION_KEY_LENGTH)
    count = StrictIntegerField(min_value=1, max_value=MAX_COUNT, required=False, default=3)
    # SPEC 15.5: the prompt, as token ids or as its block keys (SPEC 15.1), one or neither; needs ``model``.
    prompt_token_ids = TokenIdsField(MAX_PROMPT_TOKENS, required=False, allow_null=True, default=None)
    prompt_block_keys = IntegerListField(INT64_MIN, INT64_MAX, MAX_PROMPT_KEYS, required=False, allow_null=True,
                                         default=None)
    # SPEC 16.3-16.4: the prompt as text or as a chat, the way OpenAI's completions and chat completions carry it.
    prompt = PromptField(required=False, allow_null=True, default=None)
    messages = MessagesField(required=False, allow_null=True, default=None)
    add_generation_prompt = StrictBooleanField(required=False, default=True)
    # vLLM's own: whether the tokenizer's special tokens are added around the text (a prompt's default: true; a
    # chat's: false, its template writes them).
    add_special_tokens = StrictBooleanField(required=False, allow_null=True, default=None)
    continue_final_message = StrictBooleanField(required=False, default=False)
    chat_template_kwargs = ObjectOrNull(required=False, default=None)
    tools = serializers.ListField(child=JSONObjectField(), required=False, allow_null=True, default=None)

    def validate(self, attrs):
        """The prompt's rules across fields, after each field's own (``BodyChecks`` and ``is_valid`` run it)."""
        sent = [form for form in PROMPT_FORMS if attrs.get(form) is not None]
        if sent[:2] == ["prompt_token_ids", "prompt_block_keys"]:
            raise serializers.ValidationError({"prompt_block_keys": ["Send prompt_token_ids or prompt_block_keys, "
                                                                     "not both."]})
        if len(sent) > 1:
            raise serializers.ValidationError({sent[1]: [f"Send one prompt form of {', '.join(PROMPT_FORMS)}; "
                                                         f"this body has {' and '.join(sent)}."]})
        if sent and attrs.get("model") is None:
            raise serializers.ValidationError({"model": ["A prompt needs the model its keys are computed for."]})
        if attrs["add_generation_prompt"] and attrs["continue_final_message"] and attrs.get("messages") is not None:
            raise serializers.ValidationError({"continue_final_message": [
                "continue_final_message and add_generation_prompt cannot both be true."]})
        return attrs


# What ``POST /v1/placement``, its GET variant and the pool page's panel check a body with: the declared rules
# as one plain loop (a serializer built per request cost ~0.2 ms of DRF's deep copies of its fields).
PLACEMENT_BODY = BodyChecks(PlacementSerializer, null_is_invalid=True)


# ``GET /v1/placement/endpoint`` (nginx's auth_request): the fields a router may send as request headers.
# Each is also a query parameter (which wins), as are ``count`` and ``exclude``.
ENDPOINT_HEADERS = {
    "model": "X-Fleetwatch-Model", "adapter": "X-Fleetwatch-Adapter", "session_key": "X-Fleetwatch-Session-Key",
    "prompt_tokens": "X-Fleetwatch-Prompt-Tokens", "max_tokens": "X-Fleetwatch-Max-Tokens",
}
# One destination unless asked for more: ``proxy_pass http://$destination`` takes one host:port.
ENDPOINT_COUNT = 1


class FeedbackSerializer(serializers.Serializer):
    instance_id = StrictCharField(max_length=NAME_LENGTH)
    outcome = serializers.ChoiceField(choices=OUTCOMES)
    status_code = StrictIntegerField(min_value=100, max_value=599, required=False, allow_null=True, default=None)
    # SPEC 16.4: the engine's usage.prompt_tokens_details.cached_tokens, and the placement's prefix_hit_tokens for
    # that instance; each counted only when sent.
    cached_tokens = StrictIntegerField(min_value=0, required=False, allow_null=True, default=None)
    predicted_cached_tokens = StrictIntegerField(min_value=0, required=False, allow_null=True, default=None)

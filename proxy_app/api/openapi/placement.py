"""The Proxy's placement, its GET variant for nginx, and feedback (SPEC 14.1, 14.2) as OpenAPI.

The answers' serializers (``PlacementCandidate``, ``InstancePlacement``, ``FeedbackTaken``) are also what
``proxy_app.api.placement`` builds its answers from (``RowShape.answer_builder`` of ``controlplane.api.rows``).
"""

import itertools
import operator

from drf_spectacular.extensions import OpenApiSerializerExtension, OpenApiSerializerFieldExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
)
from rest_framework import serializers

from agent.prefix_keys import MAX_TOKEN_ID
from controlplane.api.placement import DESTINATION_HEADER, MAX_EXCLUDE, MODEL_LENGTH, VERDICT_HEADER
from controlplane.api.rows import always, reads
from controlplane.api.schema.errors import FORBIDDEN, ROUTE_BUSY, besides, read_errors
from controlplane.api.schema.operations import write_operation
from controlplane.api.schema.placement import answer_fields, placement_operation
from controlplane.endpoints.models import NAME_LENGTH
from controlplane.figures import MAX_DB_INT
from proxy_app.api.openapi.answers import or_unknown_instance
from proxy_app.api.serializers import (
    ENDPOINT_COUNT,
    ENDPOINT_HEADERS,
    MAX_COUNT,
    MAX_PROMPT_TOKENS,
    SESSION_KEY_LENGTH,
    FeedbackSerializer,
    PlacementSerializer,
)

PLACEMENT = ["placement"]
ARRAY = {"type": "array"}
TOKEN_IDS = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": MAX_TOKEN_ID},
             "maxItems": MAX_PROMPT_TOKENS}


class PromptScheme(OpenApiSerializerFieldExtension):
    """``PromptField``: OpenAI completions' ``prompt`` (SPEC 16.3)."""

    target_class = "proxy_app.api.serializers.PromptField"

    def map_serializer_field(self, auto_schema, direction):
        return {"oneOf": [
            {"type": "string"}, {**TOKEN_IDS, "minItems": 1},
            {"type": "array", "minItems": 1, "items": {"type": "string"}},
            {"type": "array", "minItems": 1, "items": TOKEN_IDS},
        ], "nullable": True, "description": "A completion's prompt: text (tokenized as the engine does), token ids, "
                                            "or a batch of either, keyed by its first item."}


class MessagesScheme(OpenApiSerializerFieldExtension):
    """``MessagesField``: OpenAI chat's ``messages`` (SPEC 16.3)."""

    target_class = "proxy_app.api.serializers.MessagesField"

    def map_serializer_field(self, auto_schema, direction):
        text = {"type": "object", "required": ["type", "text"],
                "properties": {"type": {"type": "string", "enum": ["text"]}, "text": {"type": "string"}}}
        other = {"type": "object", "required": ["type"],
                 "properties": {"type": {"type": "string", "not": {"enum": ["text"]}}}}
        content = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"oneOf": [text, other]}}],
                   "nullable": True}
        message = {"type": "object", "required": ["role"], "properties": {"role": {"type": "string"},
                                                                         "content": content}}
        return {"type": "array", "minItems": 1, "items": message, "nullable": True,
                "description": "A chat, rendered by the model's chat template and tokenized as the engine does."}


# Each prompt form's value when sent (not null): SPEC 15.5's two arrays, 16.3's text or array and chat.
PROMPT_FORMS = {"prompt_token_ids": ARRAY, "prompt_block_keys": ARRAY,
                "prompt": {"anyOf": [{"type": "string"}, ARRAY]}, "messages": ARRAY}


class PlacementBodyScheme(OpenApiSerializerExtension):
    """``PlacementSerializer`` as declared, with its rules across fields (SPEC 15.5, 16.3): one prompt form at most
    (token ids, block keys, text or chat), only with ``model``; a chat does not both continue its final message
    and add a generation prompt."""

    target_class = "proxy_app.api.serializers.PlacementSerializer"

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_basic_serializer(self.target, direction)
        if direction != "request":
            return schema
        refused = [{"required": [one, other], "properties": {one: PROMPT_FORMS[one], other: PROMPT_FORMS[other]}}
                   for one, other in itertools.combinations(PROMPT_FORMS, 2)]
        for prompt, sent in PROMPT_FORMS.items():
            refused.append({"required": [prompt], "properties": {prompt: sent}, "not": {"required": ["model"]}})
            refused.append({"required": [prompt, "model"], "properties": {prompt: sent, "model": {"enum": [None]}}})
        refused.append({"required": ["messages", "continue_final_message"], "properties": {
            "messages": ARRAY, "continue_final_message": {"enum": [True]},
            "add_generation_prompt": {"not": {"enum": [False]}}}})
        return {**schema, "not": {"anyOf": refused}}


def ranked(field, attribute, using=None):
    """``field``, read from the ranked candidate (``Ranked``; ``candidate.…``: what is known of the instance)."""
    return reads(field, f"ranked.{attribute}", using=using)


class PlacementCandidate(serializers.Serializer):
    instance_id = ranked(serializers.CharField(), "candidate.instance_id")
    host = ranked(serializers.CharField(), "candidate.host")
    port = ranked(serializers.IntegerField(), "candidate.port")
    endpoints = ranked(serializers.ListField(child=serializers.JSONField()), "candidate.endpoints", using=list)
    pressure = ranked(serializers.FloatField(allow_null=True, help_text=(
        "max(waiting ÷ W, KV usage ÷ K), or GPU utilisation ÷ 100 without an engine; null: none known.")), "pressure")
    requests_waiting = ranked(serializers.IntegerField(allow_null=True), "candidate.requests_waiting")
    requests_running = ranked(serializers.IntegerField(allow_null=True), "candidate.requests_running")
    kv_cache_usage_ratio = ranked(serializers.FloatField(allow_null=True), "candidate.kv_cache_usage_ratio")
    signal_age_s = ranked(serializers.FloatField(allow_null=True, help_text="Age of the latest snapshot."),
                          "signal_age_s")
    reasons = ranked(serializers.ListField(child=serializers.CharField()), "reasons", using=list)
    prefix_hit_blocks = ranked(serializers.IntegerField(help_text="The longest leading run of the prompt's block "
                                                                  "keys this instance holds (SPEC 15.5); 0 when "
                                                                  "none or without a prompt."), "prefix_hit_blocks")
    prefix_hit_tokens = reads(serializers.IntegerField(help_text="prefix_hit_blocks × FLEETWATCH_PREFIX_BLOCK_TOKENS."),
                              "ranked.prefix_hit_blocks", "block_tokens", using=operator.mul)


InstancePlacement = type("InstancePlacement", (serializers.Serializer,), {
    "__doc__": "Where a request should go in this pool (SPEC 14.1, 15.5).",
    **answer_fields(PlacementCandidate, "At most `count`; none when shedding or unavailable."),
    "prompt_blocks": reads(serializers.IntegerField(allow_null=True, help_text="The prompt's full blocks; null "
                                                                               "without a prompt."),
                           "decision.prompt_blocks"),
    "prefix_source": reads(serializers.ChoiceField(choices=["events", "placements"], allow_null=True, help_text=(
        "Where cached prefixes were read from: `events` (some eligible instance's engine publishes its KV-cache "
        "events), `placements` (learned from this pool's own accepted placements); null without a prompt.")),
        "decision.prefix_source"),
})


class TokenizerUsed(serializers.Serializer):
    source = serializers.ChoiceField(choices=["operator", "agent"], help_text=(
        "`operator`: FLEETWATCH_TOKENIZERS; `agent`: files an agent offered (SPEC 16.2)."))
    sha256 = serializers.CharField(help_text="SHA-256 of the tokenizer's `tokenizer.json`.")


class TextPrompt(serializers.Serializer):
    """What an answer adds when the body's prompt was ``prompt`` or ``messages`` (SPEC 16.3), and only then: a
    body of the earlier forms is answered exactly as before."""

    prompt_tokens = reads(serializers.IntegerField(allow_null=True, help_text=(
        "The prompt's tokens as the engine counts them; null when it could not be tokenized.")), "prompt.tokens")
    tokenizer = reads(TokenizerUsed(allow_null=True, help_text="The tokenizer used; null for token ids sent as "
                                                               "`prompt`, or without one."), "prompt.tokenizer")
    prompt_error = reads(serializers.ChoiceField(
        choices=["no_tokenizer", "template_error", "template_timeout", "non_text"], allow_null=True, help_text=(
            "Why the prompt could not be keyed; it is then placed by load alone (prefix_source null).")),
        "prompt.error")


class InstancePlacementScheme(OpenApiSerializerExtension):
    """``InstancePlacement`` as declared, with ``TextPrompt``'s keys beside its own, not required (present only
    for a text or chat prompt)."""

    target_class = InstancePlacement

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_basic_serializer(self.target, direction)
        extra = auto_schema._map_basic_serializer(TextPrompt, direction)
        return {**schema, "properties": {**schema["properties"], **extra["properties"]}}


class FeedbackTaken(serializers.Serializer):
    ok = always(serializers.BooleanField(help_text="true: the outcome was counted."), True)
    fenced = serializers.BooleanField(help_text="Whether the instance is fenced now.")


FEEDBACK_ANSWER = or_unknown_instance("FeedbackAnswer", FeedbackTaken)


placement_schema = placement_operation(
    "placement", "Where should this request go", (
        "Ranks the eligible instances of this pool (alive or suspect, not fenced, not rejecting, no GPU in error, "
        "serving the model and adapter, a snapshot at most FLEETWATCH_PLACEMENT_MAX_AGE_S old unless none is) by "
        "pressure, lowest first; with a `session_key`, the same key keeps its instance while that one is "
        "unsaturated. With `prompt_token_ids` or `prompt_block_keys` (SPEC 15.1 keys; one of them, and `model`), "
        "each candidate says how much of the prompt it holds cached and the ranking weighs that against pressure, "
        "never changing the verdict. The body may be up to FLEETWATCH_PREFIX_MAX_BODY_BYTES (1 MiB). See "
        "docs/placement.md for the formula and the tie-breaks."
    ), PlacementSerializer, InstancePlacement, PLACEMENT,
)

feedback_schema = write_operation(
    "placement_feedback", "How a placed request went", (
        "A router's outcome of a request it sent. FLEETWATCH_FENCE_ERRORS (3) consecutive non-ok outcomes fence "
        "the instance; it comes back after FLEETWATCH_FENCE_RECOVERY_S (10 s) without trouble. Never rate limited per "
        "token; past the route lane's share of a web process (FLEETWATCH_ROUTE_SHARE), a 429 `route_busy`. "
        "An unknown instance is answered **200** `{\"ok\": false, \"error\": \"unknown_instance\"}`."
    ), FeedbackSerializer, {200: FEEDBACK_ANSWER, 429: ROUTE_BUSY}, "route", tags=PLACEMENT,
    examples=[OpenApiExample("An error", {"instance_id": "gpu-node-1", "outcome": "error", "status_code": 502},
                             request_only=True)],
)


def endpoint_parameters():
    """The query parameters and request headers of ``GET /v1/placement/endpoint``, with the answer's headers."""
    fields = {
        "model": {"type": "string", "minLength": 1, "maxLength": MODEL_LENGTH},
        "adapter": {"type": "string", "minLength": 1, "maxLength": 255},
        "session_key": {"type": "string", "minLength": 1, "maxLength": SESSION_KEY_LENGTH},
        "prompt_tokens": {"type": "integer", "minimum": 0, "maximum": MAX_DB_INT},
        "max_tokens": {"type": "integer", "minimum": 0, "maximum": MAX_DB_INT},
    }
    query = [
        *(OpenApiParameter(field, schema, OpenApiParameter.QUERY, description=f"The POST's `{field}`.")
          for field, schema in fields.items()),
        OpenApiParameter("count", {"type": "integer", "minimum": 1, "maximum": MAX_COUNT}, OpenApiParameter.QUERY,
                         default=ENDPOINT_COUNT, description="Candidates to answer; one by default (nginx's "
                                                             "`proxy_pass` takes one address)."),
        OpenApiParameter("exclude", {"type": "array", "maxItems": MAX_EXCLUDE,
                                     "items": {"type": "string", "minLength": 1, "maxLength": NAME_LENGTH}},
                         OpenApiParameter.QUERY, explode=True,
                         description="Instance ids to leave out; repeat it for more than one."),
    ]
    headers = [
        OpenApiParameter(header, fields[field], OpenApiParameter.HEADER,
                         description=f"`{field}`, when the query does not give it.")
        for field, header in ENDPOINT_HEADERS.items()
    ]
    text = OpenApiTypes.STR
    answer = [
        OpenApiParameter(DESTINATION_HEADER, text, OpenApiParameter.HEADER, response=[200],
                         description="`host:port[,host:port…]` of the candidates, best first."),
        OpenApiParameter(VERDICT_HEADER, text, OpenApiParameter.HEADER, response=[200, 400, 403],
                         enum=["accept", "queue", "shed", "unavailable", "invalid"],
                         description="The verdict (always on a 200); `invalid` on a 400; absent on a 403 of a token "
                                     "of another scope."),
        OpenApiParameter("x-fleetwatch-instance-id", text, OpenApiParameter.HEADER, response=[200],
                         description="The first candidate's `instance_id` as the contents of a JSON string "
                                     "(escaped where it holds quotes, backslashes or non-ASCII characters)."),
        OpenApiParameter("Retry-After", OpenApiTypes.INT, OpenApiParameter.HEADER, response=[403, 503],
                         description="Seconds before asking again: shedding (403), or the database unavailable."),
        OpenApiParameter("WWW-Authenticate", text, OpenApiParameter.HEADER, response=[401], required=True,
                         enum=["Bearer"], description="Always `Bearer`."),
    ]
    return [*query, *headers, *answer]


REFUSED = PolymorphicProxySerializer(
    component_name="InstancePlacementRefused", resource_type_field_name=None,
    serializers=[InstancePlacement, FORBIDDEN.response, ROUTE_BUSY.response],
)

endpoint_schema = extend_schema(
    operation_id="placement_endpoint", summary="Where should this request go, for nginx's auth_request",
    tags=PLACEMENT,
    description=(
        "`POST /v1/placement` as a GET without a body, in the shape nginx's `auth_request` takes: the fields come "
        "from query parameters or `X-Fleetwatch-*` request headers (the query wins), "
        "one candidate by default. accept and queue are a 200 with `x-gateway-destination-endpoint`; shed and "
        "unavailable a **403** (auth_request passes only 2xx, 401 and 403) whose `x-fleetwatch-verdict` says "
        "which, for nginx to answer its client 429 or 503 (docs/placement.md, deploy/nginx/). The body is the "
        "POST's answer.\n\nNeeds a token of scope `route` or `read`. Never rate limited."
    ),
    parameters=endpoint_parameters(), request=None,
    responses=besides({
        200: OpenApiResponse(InstancePlacement, description="accept or queue: candidates, best first."),
        403: OpenApiResponse(REFUSED, description="shed or unavailable (`x-fleetwatch-verdict`; shed too with a "
                                                  "`route_busy` body when the route lane gave its share), or a "
                                                  "token of another scope."),
    }, read_errors()),
    extensions={"x-token-scope": "route or read"},
)

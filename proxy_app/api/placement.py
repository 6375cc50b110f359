"""The Proxy's placement endpoints (SPEC 14.1, 14.2): ``POST /v1/placement`` and ``POST /v1/placement/feedback``,
and ``GET /v1/placement/endpoint``, the same placement in the shape nginx's ``auth_request`` takes."""

import dataclasses
import json

from django.conf import settings
from drf_spectacular.utils import extend_schema_view
from rest_framework import exceptions

from agent.prefix_keys import prompt_keys
from controlplane import clock
from controlplane.api.hot_path import HotWriteView, json_response
from controlplane.api.placement import VERDICT_HEADER, PlacementView, placement_response
from controlplane.api.route_gate import RouteBusy
from controlplane.api.rows import answers_of
from controlplane.api.tokens import Scope
from controlplane.endpoints.placement import Verdict
from proxy_app.api.openapi.placement import (
    FeedbackTaken,
    InstancePlacement,
    PlacementCandidate,
    TextPrompt,
    endpoint_schema,
    feedback_schema,
    placement_schema,
)
from proxy_app.api.reports import UNKNOWN_INSTANCE_ANSWER
from proxy_app.api.serializers import ENDPOINT_COUNT, ENDPOINT_HEADERS, PLACEMENT_BODY, FeedbackSerializer
from proxy_app.api.token_ids import parse_placement_body
from proxy_app.placement import fence_store
from proxy_app.placement.candidates import BOARD
from proxy_app.placement.decision import PLACEMENTS
from proxy_app.placement.inputs import Request
from proxy_app.prefix.keeper import PREFIX
from proxy_app.prefix.store import record_learned
from proxy_app.tokenizers.prompts import has_text_prompt, read_prompt

# The answers, built from the serializers the schema publishes (``controlplane.api.rows``).
CANDIDATE, PLACEMENT, TEXT_PROMPT, FEEDBACK_TAKEN = answers_of(PlacementCandidate, InstancePlacement, TextPrompt,
                                                             FeedbackTaken)


def candidate_answer(ranked):
    return CANDIDATE(ranked=ranked, block_tokens=settings.FLEETWATCH_PREFIX_BLOCK_TOKENS)


def placement_body(decision, now):
    return PLACEMENT(decision=decision, now=now, candidates=[candidate_answer(ranked) for ranked in decision.answered])


def prompt_keys_of(data):
    """The SPEC 15.1 keys of the body's prompt (its token ids', or its keys as sent); None without one."""
    if data.get("prompt_block_keys") is not None:
        return tuple(data["prompt_block_keys"])
    if data.get("prompt_token_ids") is not None:
        return tuple(prompt_keys(data["model"], data["prompt_token_ids"], settings.FLEETWATCH_PREFIX_BLOCK_TOKENS,
                                 adapter=data["adapter"]))
    return None


def request_of(data):
    if data["model"] and data["adapter"] is None and (parent := BOARD.parent_of(data["model"])) is not None:
        data = {**data, "model": parent, "adapter": data["model"]}  # a served adapter's id as the model (SPEC 16.1)
    return Request(model=data["model"], adapter=data["adapter"], prompt_tokens=data["prompt_tokens"],
                   max_tokens=data["max_tokens"], session_key=data["session_key"], count=data["count"],
                   exclude=frozenset(data["exclude"]), prompt_keys=prompt_keys_of(data))


def with_text_prompt(request, prompt):
    """``request`` keyed by a text or chat prompt's ids (``read_prompt``'s), or by load alone without them.

    All but the last token are keyed: an engine computes at least a prompt's last token whatever it holds (vLLM's
    and SGLang's prefix caches never hit it), so the hit answered is what the engine will reuse.
    """
    if prompt.ids is None:
        return request
    keys = prompt_keys(request.model, prompt.ids[:-4], settings.FLEETWATCH_PREFIX_BLOCK_TOKENS,
                       adapter=request.adapter)
    return dataclasses.replace(request, prompt_keys=tuple(keys))


def decide(request, now, dry_run=False):
    """The board's decision, with the pool's prefix index when the request has a prompt (SPEC 15.5). An
    ``accept`` in learned mode (``prefix_source`` ``placements``) records the prompt on its first candidate."""
    if not request.prompt_keys:
        return BOARD.decide(request, now, dry_run=dry_run)
    decision = BOARD.decide(request, now, dry_run=dry_run,
                            prefix_hits=lambda source, keys: PREFIX.hits(source, keys, now))
    if not dry_run and decision.verdict is Verdict.ACCEPT and decision.prefix_source == PLACEMENTS:
        instance_id = decision.answered[0].candidate.instance_id
        ttl_s = settings.FLEETWATCH_PREFIX_LEARNED_TTL_S
        record_learned(instance_id, request.prompt_keys, now, ttl_s)
        PREFIX.learn(instance_id, request.prompt_keys, now, now + ttl_s)
    return decision


@extend_schema_view(post=placement_schema)
class InstancePlacementView(PlacementView):
    """``POST /v1/placement``: where a request should go in this pool, and whether the pool takes it now."""

    body_checks = PLACEMENT_BODY
    parse_body = staticmethod(parse_placement_body)  # the prompt's token ids as packed bytes

    def answer(self, data):
        return placement_response(*placement_of(data))


def placement_request(data):
    """``(request, prompt)`` of a validated body: the ``Request`` keyed by its prompt whatever its form, and for a
    text or chat prompt ``read_prompt``'s reading of it (else None)."""
    request = request_of(data)
    if not has_text_prompt(data):
        return request, None
    prompt = read_prompt(data, request.model)
    return with_text_prompt(request, prompt), prompt


def answer_of(decision, prompt, now):
    """The answer body of ``decision``, with a text or chat prompt's keys (SPEC 16.3) when it had one."""
    body = placement_body(decision, now)
    if prompt is not None:
        body.update(TEXT_PROMPT(prompt=prompt))
    return body


def placement_of(data):
    """``(verdict, answer body)`` of a validated placement body: the one decision both placement views answer."""
    now = clock.now()
    request, prompt = placement_request(data)
    decision = decide(request, now)
    return decision.verdict, answer_of(decision, prompt, now)


# nginx's auth_request lets a 2xx through, answers a 401 or 403 itself and turns anything else into a 500,
# so the GET variant refuses (shed, unavailable) with a 403 and names the verdict in a header nginx maps.
ENDPOINT_REFUSAL_STATUS = 403
INSTANCE_HEADER = "x-fleetwatch-instance-id"
INVALID_VERDICT = "invalid"
META_KEYS = {field: "HTTP_" + header.upper().replace("-", "_") for field, header in ENDPOINT_HEADERS.items()}


def endpoint_fields(request):
    """The placement body of a ``GET /v1/placement/endpoint``, from its query and headers, still unvalidated.

    A query parameter wins over its header; an empty value is a value (a 400), as nginx sends no header for
    an empty variable. ``exclude`` may repeat.
    """
    data = {"count": ENDPOINT_COUNT, "exclude": request.GET.getlist("exclude")}
    for field, key in META_KEYS.items():
        if field in request.GET:
            data[field] = request.GET[field]
        elif key in request.META:
            data[field] = request.META[key]
    if "count" in request.GET:
        data["count"] = request.GET["count"]
    return data


def endpoint_response(verdict, body):
    """The POST's answer with a 403 for shed and unavailable, the verdict in ``x-fleetwatch-verdict`` and the
    first candidate's id in ``x-fleetwatch-instance-id`` (what nginx needs to post feedback)."""
    response = placement_response(verdict, body)
    if not body["ok"]:
        response.status_code = ENDPOINT_REFUSAL_STATUS
    response[VERDICT_HEADER] = verdict.value
    if body["candidates"]:
        response[INSTANCE_HEADER] = json_string_contents(body["candidates"][0]["instance_id"])
    return response


def json_string_contents(text):
    """``text`` as it stands between the quotes of a JSON string, in ASCII: the id itself unless it holds quotes,
    backslashes, control or non-ASCII characters, and always safe in a header and inside nginx's ``proxy_set_body``."""
    return json.dumps(text)[1:-1]


@extend_schema_view(get=endpoint_schema)
class PlacementEndpointView(HotWriteView):
    """``GET /v1/placement/endpoint``: ``POST /v1/placement`` for nginx's ``auth_request`` (docs/placement.md).

    The same decision, asked with query parameters or ``X-Fleetwatch-*`` headers instead of a body (a
    subrequest has none), the same token scopes and no rate limit: ``answer_write``'s steps for a GET.
    """

    http_method = "GET"
    http_method_names = [name for name in HotWriteView.http_method_names if name != "post"]  # for the schema
    write_scope = PlacementView.write_scope
    rate_limited = False
    route_lane = True

    def get(self, request):
        """What the schema describes; Django's dispatch and the steps answer through ``respond``."""
        return self.respond(self.request_data(request), request.auth)

    def request_data(self, request):
        return endpoint_fields(request)

    def respond(self, data, grant):
        return endpoint_response(*placement_of(PLACEMENT_BODY(data)))

    def refused(self, response, exc):
        if isinstance(exc, exceptions.ValidationError):
            response[VERDICT_HEADER] = INVALID_VERDICT  # for nginx, which sees only a 500 of it
        elif isinstance(exc, RouteBusy):
            # The route lane is full: for nginx a shed (a 429 with this Retry-After to its client), as a 429
            # here would be a 500 there.
            response.status_code = ENDPOINT_REFUSAL_STATUS
            response[VERDICT_HEADER] = Verdict.SHED.value
        return response


@extend_schema_view(post=feedback_schema)
class FeedbackView(HotWriteView):
    """``POST /v1/placement/feedback``: a router's outcome of a request it sent; fences after repeated errors."""

    write_scope = Scope.ROUTE.value
    rate_limited = False
    route_lane = True

    def respond(self, data, grant):
        data = FeedbackSerializer().to_internal_value(data)
        fenced = fence_store.feedback(data["instance_id"], data["outcome"], clock.now())
        if fenced is None:
            return json_response(UNKNOWN_INSTANCE_ANSWER)
        fence_store.count_cached_tokens(data["instance_id"], data["cached_tokens"], data["predicted_cached_tokens"])
        return json_response(FEEDBACK_TAKEN(fenced=fenced))

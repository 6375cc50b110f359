"""The Proxy's placement endpoints (SPEC 14.1, 14.2): ``POST /v1/placement`` and ``POST /v1/placement/feedback``."""

from controlplane import clock
from controlplane.api.hot_path import HotWriteView, json_response
from controlplane.api.placement import PlacementView, placement_response
from controlplane.api.tokens import Scope
from proxy_app import fences
from proxy_app.openapi.placement import feedback_schema, placement_schema
from proxy_app.placement import Request
from proxy_app.placement_board import BOARD
from proxy_app.serializers import FeedbackSerializer, PlacementSerializer


def candidate_answer(ranked):
    candidate = ranked.candidate
    return {
        "instance_id": candidate.instance_id,
        "host": candidate.host,
        "port": candidate.port,
        "endpoints": list(candidate.endpoints),
        "pressure": ranked.pressure,
        "requests_waiting": candidate.requests_waiting,
        "requests_running": candidate.requests_running,
        "kv_cache_usage_ratio": candidate.kv_cache_usage_ratio,
        "signal_age_s": ranked.signal_age_s,
        "reasons": list(ranked.reasons),
    }


def placement_body(decision, now):
    verdict = decision.verdict.value
    return {
        "ok": verdict in ("accept", "queue"),
        "verdict": verdict,
        "reason": decision.reason,
        "generated_at": now,
        "considered": decision.considered,
        "eligible": decision.eligible,
        "excluded": decision.excluded,
        "candidates": [candidate_answer(ranked) for ranked in decision.answered],
    }


def request_of(data):
    return Request(model=data["model"], adapter=data["adapter"], prompt_tokens=data["prompt_tokens"],
                   max_tokens=data["max_tokens"], session_key=data["session_key"], count=data["count"],
                   exclude=frozenset(data["exclude"]))


class InstancePlacementView(PlacementView):
    """``POST /v1/placement``: where a request should go in this pool, and whether the pool takes it now."""

    body_serializer = PlacementSerializer

    @placement_schema
    def post(self, request):
        return super().post(request)

    def answer(self, data):
        now = clock.now()
        decision = BOARD.decide(request_of(data), now)
        return placement_response(decision.verdict.value, placement_body(decision, now))


class FeedbackView(HotWriteView):
    """``POST /v1/placement/feedback``: a router's outcome of a request it sent; fences after repeated errors."""

    write_scope = Scope.ROUTE.value
    rate_limited = False

    @feedback_schema
    def post(self, request):
        data = FeedbackSerializer().to_internal_value(request.data)
        fenced = fences.feedback(data["instance_id"], data["outcome"], clock.now())
        if fenced is None:
            return json_response({"ok": False, "error": "unknown_instance"})
        return json_response({"ok": True, "fenced": fenced})

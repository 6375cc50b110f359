"""The Proxy's placement and feedback (SPEC 14.1, 14.2) as OpenAPI."""

from drf_spectacular.utils import OpenApiExample, PolymorphicProxySerializer
from rest_framework import serializers

from controlplane.api.schema.operations import write_operation
from controlplane.api.schema.placement import answer_fields, placement_operation
from proxy_app.openapi.answers import UnknownInstance
from proxy_app.serializers import FeedbackSerializer, PlacementSerializer

PLACEMENT = ["placement"]


class PlacementCandidate(serializers.Serializer):
    instance_id = serializers.CharField()
    host = serializers.CharField()
    port = serializers.IntegerField()
    endpoints = serializers.ListField(child=serializers.JSONField())
    pressure = serializers.FloatField(allow_null=True, help_text="max(waiting ÷ W, KV usage ÷ K), or GPU "
                                                                 "utilisation ÷ 100 without an engine; null: none known.")
    requests_waiting = serializers.IntegerField(allow_null=True)
    requests_running = serializers.IntegerField(allow_null=True)
    kv_cache_usage_ratio = serializers.FloatField(allow_null=True)
    signal_age_s = serializers.FloatField(allow_null=True, help_text="Age of the latest snapshot.")
    reasons = serializers.ListField(child=serializers.CharField())


InstancePlacement = type("InstancePlacement", (serializers.Serializer,), {
    "__doc__": "Where a request should go in this pool (SPEC 14.1).",
    **answer_fields(PlacementCandidate, "At most `count`; none when shedding or unavailable."),
})


class FeedbackTaken(serializers.Serializer):
    ok = serializers.BooleanField(help_text="true: the outcome was counted.")
    fenced = serializers.BooleanField(help_text="Whether the instance is fenced now.")


FEEDBACK_ANSWER = PolymorphicProxySerializer(
    component_name="FeedbackAnswer", resource_type_field_name=None, serializers=[FeedbackTaken, UnknownInstance],
)


placement_schema = placement_operation(
    "placement", "Where should this request go", (
        "Ranks the eligible instances of this pool (alive or suspect, not fenced, not rejecting, no GPU in error, "
        "serving the model and adapter, a snapshot at most FLEETWATCH_PLACEMENT_MAX_AGE_S old unless none is) by "
        "pressure, lowest first; with a `session_key`, the same key keeps its instance while that one is "
        "unsaturated. See docs/placement.md for the formula and the tie-breaks."
    ), PlacementSerializer, InstancePlacement, PLACEMENT,
)

feedback_schema = write_operation(
    "placement_feedback", "How a placed request went", (
        "A router's outcome of a request it sent. FLEETWATCH_FENCE_ERRORS (3) consecutive non-ok outcomes fence "
        "the instance; it comes back after FLEETWATCH_FENCE_RECOVERY_S (10 s) without trouble. Never rate limited. "
        "An unknown instance is answered **200** `{\"ok\": false, \"error\": \"unknown_instance\"}`."
    ), FeedbackSerializer, {200: FEEDBACK_ANSWER}, "route", tags=PLACEMENT,
    examples=[OpenApiExample("An error", {"instance_id": "gpu-node-1", "outcome": "error", "status_code": 502},
                             request_only=True)],
)

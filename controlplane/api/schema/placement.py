"""Placement operations as both roles describe them (SPEC 14.1, 14.3): the verdicts, their codes and headers."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, PolymorphicProxySerializer, extend_schema
from rest_framework import serializers

from controlplane.api.placement import DESTINATION_HEADER, answers_candidates
from controlplane.api.rows import reads
from controlplane.api.schema.errors import (
    DATABASE_UNAVAILABLE,
    ROUTE_BUSY,
    UNSUPPORTED_MEDIA_TYPE,
    besides,
    read_errors,
)

VERDICTS = ["accept", "queue", "shed", "unavailable"]
RULES_HELP = "How many were not eligible, per rule (only rules that left some out)."


def answer_fields(candidate, candidates_help):
    """The fields of a placement answer around a ``candidate`` serializer, each read as the role's builder
    (``RowShape(answer).answer_builder()``) reads it: from the ``decision``, the answer's ``now`` and the
    role's ``candidates`` (its answer of each of ``decision.answered``)."""
    return {
        "ok": reads(serializers.BooleanField(help_text="true for accept and queue."), "decision.verdict.value",
                    using=answers_candidates),
        "verdict": reads(serializers.ChoiceField(choices=VERDICTS), "decision.verdict.value"),
        "reason": reads(serializers.CharField(help_text="Why: lowest_pressure, session_affinity, all_saturated, "
                                                        "all_over_shed_pressure, fail_open_stale, no_eligible_…"),
                        "decision.reason"),
        "generated_at": reads(serializers.FloatField(help_text="Epoch seconds: the answer's now."), "now"),
        "considered": reads(serializers.IntegerField(min_value=0), "decision.considered"),
        "eligible": reads(serializers.IntegerField(min_value=0), "decision.eligible"),
        "excluded": reads(serializers.DictField(child=serializers.IntegerField(min_value=1), help_text=RULES_HELP),
                          "decision.excluded"),
        "candidates": reads(candidate(many=True, help_text=candidates_help), "candidates"),
    }


def placement_operation(operation_id, summary, description, request, answer, tags):
    """``extend_schema`` of a placement read: 200 accept or queue, 429 shed, 503 unavailable (or no database)."""
    headers = [
        OpenApiParameter(DESTINATION_HEADER, OpenApiTypes.STR, OpenApiParameter.HEADER, response=[200],
                         description="`host:port[,host:port…]` of the candidates, best first; absent when none."),
        OpenApiParameter("Retry-After", OpenApiTypes.INT, OpenApiParameter.HEADER, response=[429, 503],
                         description="Seconds before asking again: shedding (429), or the database unavailable (503)."),
        OpenApiParameter("WWW-Authenticate", OpenApiTypes.STR, OpenApiParameter.HEADER, response=[401],
                         required=True, enum=["Bearer"], description="Always `Bearer`."),
    ]
    unavailable = PolymorphicProxySerializer(
        component_name=f"{answer.__name__}Unavailable", resource_type_field_name=None,
        serializers=[answer, DATABASE_UNAVAILABLE.response],
    )
    refused = PolymorphicProxySerializer(
        component_name=f"{answer.__name__}ShedOrBusy", resource_type_field_name=None,
        serializers=[answer, ROUTE_BUSY.response],
    )
    return extend_schema(
        operation_id=operation_id, summary=summary, tags=tags,
        description=f"{description}\n\nNeeds a token of scope `route` or `read`. Never rate limited per token; "
                    "past the route lane's share of a web process, a 429 `route_busy`.",
        parameters=headers, request=request,
        responses=besides({
            200: OpenApiResponse(answer, description="accept or queue: candidates, best first."),
            429: OpenApiResponse(refused, description="shed: every eligible one is over the shed pressure; or "
                                                      "`route_busy`: this process gave routing its share "
                                                      "(`FLEETWATCH_ROUTE_SHARE`)."),
            503: OpenApiResponse(unavailable, description="unavailable: nothing eligible; or the database is down."),
        }, {**read_errors(), 415: UNSUPPORTED_MEDIA_TYPE}),
        extensions={"x-token-scope": "route or read"},
    )

"""The Scheduler's placement endpoint (SPEC 14.3): ``POST /v1/proxy/placement``, over this process's board of pools."""

from django.conf import settings
from drf_spectacular.utils import extend_schema_view

from controlplane import clock
from controlplane.api.placement import PlacementView, placement_response
from controlplane.api.rows import answers_of
from controlplane.endpoints.boards import PlacementKeeper
from scheduler_app.models import Proxy
from scheduler_app.openapi import PoolPlacement, PoolPlacementCandidate, placement_schema
from scheduler_app.placement import PoolBoard, PoolCandidate, PoolPolicy, PoolRequest
from scheduler_app.serializers import POOL_PLACEMENT_BODY

FIELDS = ("proxy_id", "host", "port", "last_seen_at", "pool_resource_reported_at",
          "pool_resource__pool_admission_state", "pool_resource__engine__saturation",
          "pool_resource__engine__models", "pool_resource__instances__alive")


def _number(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def candidate_of(row):
    """A proxy as placement sees it: what its latest pool summary says (defensively: it is the proxy's word)."""
    models = row["pool_resource__engine__models"]
    names = frozenset(entry["model"] for entry in models if isinstance(entry, dict)
                      and isinstance(entry.get("model"), str)) if isinstance(models, list) else frozenset()
    admission = row["pool_resource__pool_admission_state"]
    alive = _number(row["pool_resource__instances__alive"])
    return PoolCandidate(
        proxy_id=row["proxy_id"], host=row["host"], port=row["port"], last_seen_at=row["last_seen_at"],
        summary_at=row["pool_resource_reported_at"],
        pool_admission_state=admission.lower() if isinstance(admission, str) else None,
        models=names, saturation=_number(row["pool_resource__engine__saturation"]),
        alive_instances=int(alive) if alive is not None and abs(alive) < 2**62 else 0,
    )


class PoolKeeper(PlacementKeeper):
    """This web process's board of the fleet's pools (``BOARD``)."""

    model = Proxy
    fields = FIELDS

    def new_board(self, capacity):
        return PoolBoard(capacity=capacity)

    def candidate_of(self, row, old_board):
        return candidate_of(row)

    def policy(self):
        return PoolPolicy(ttl_s=Proxy.ttl_s(), shed_pressure=settings.FLEETWATCH_PLACEMENT_SHED_PRESSURE)


BOARD = PoolKeeper()


# The answers, built from the serializers the schema publishes (``controlplane.api.rows``).
CANDIDATE, PLACEMENT = answers_of(PoolPlacementCandidate, PoolPlacement)


def pool_candidate_answer(ranked):
    return CANDIDATE(ranked=ranked)


def pool_placement_body(decision, now):
    return PLACEMENT(decision=decision, now=now,
                     candidates=[pool_candidate_answer(ranked) for ranked in decision.answered])


@extend_schema_view(post=placement_schema)
class PoolPlacementView(PlacementView):
    """``POST /v1/proxy/placement``: which pool of the fleet a request should go to."""

    body_checks = POOL_PLACEMENT_BODY

    def answer(self, data):
        now = clock.now()
        request = PoolRequest(model=data["model"], count=data["count"], exclude=frozenset(data["exclude"]))
        decision = BOARD.decide(request, now)
        return placement_response(decision.verdict, pool_placement_body(decision, now))

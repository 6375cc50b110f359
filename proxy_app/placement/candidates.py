"""This web process's board of the pool's instances (SPEC 14.1), kept from the database.

How and when it refreshes is ``controlplane.endpoints.boards.PlacementKeeper``'s;
here is what a row of the pool says to placement: an instance's contact,
its fence (``proxy_app.placement.fence_store.effective_fence``), what it serves and its
latest resource. A change of contact or of fence brings a row into the next
refresh. Requests placed by this process count as ``pending`` on their
instance until its next report (each web process counts its own).
"""

from django.conf import settings
from django.db.models import Q

from controlplane import clock
from controlplane.endpoints.boards import PlacementKeeper
from proxy_app.models import Instance
from proxy_app.placement import fence_store
from proxy_app.placement.decision import CandidateBoard
from proxy_app.placement.inputs import Candidate, Policy

FIELDS = (
    "instance_id", "host", "port", "endpoints", "last_seen_at", "capability_fingerprint", "gpu_util",
    "fenced", "fence_reason", "had_ok_engine",
    "resource__resource_reported_at", "resource__has_raw_resource", "resource__admission_state",
    "resource__gpu_error_count", "resource__engine_count", "resource__engine_ok_count", "resource__engine_status",
    "resource__engine_models", "resource__engine_loras", "resource__requests_waiting",
    "resource__requests_running", "resource__kv_cache_usage_ratio", "resource__gpu_util_avg",
    "resource__kv_events_ok_count", "resource__adapter_parents",
)


def _names(values):
    return {value for value in values if isinstance(value, str) and value} if isinstance(values, list) else set()


def declared(capabilities):
    """``(models, adapters)`` an instance's capabilities declare: their model and adapters."""
    capabilities = capabilities if isinstance(capabilities, dict) else {}
    model = capabilities.get("model") if isinstance(capabilities.get("model"), dict) else {}
    adapters = [a.get("identifier") for a in capabilities.get("adapters") or () if isinstance(a, dict)]
    return frozenset(_names([model.get("identifier")])), frozenset(_names(adapters))


NOTHING_DECLARED = (frozenset(), frozenset())


def candidate_of(row, pending=0, capabilities=NOTHING_DECLARED):
    """The ``Candidate`` of one row of ``FIELDS``; ``capabilities``: what its capabilities declare
    (``declared``), its engines' models and running LoRAs added to it."""
    fenced, _ = fence_store.effective_fence(
        row["fenced"], row["fence_reason"], row["had_ok_engine"], row["resource__engine_count"],
        row["resource__engine_ok_count"], row["resource__engine_status"], row["resource__gpu_error_count"])
    models = capabilities[0] | _names(row["resource__engine_models"])
    adapters = capabilities[1] | _names(row["resource__engine_loras"])
    gpu_util = row["resource__gpu_util_avg"]
    return Candidate(
        instance_id=row["instance_id"], host=row["host"], port=row["port"],
        endpoints=tuple(row["endpoints"] or ()), last_seen_at=row["last_seen_at"],
        reported_at=row["resource__resource_reported_at"] if row["resource__has_raw_resource"] else None,
        admission_state=row["resource__admission_state"], gpu_error=bool(row["resource__gpu_error_count"]),
        fenced=fenced, models=models, adapters=adapters, engine_ok=bool(row["resource__engine_ok_count"]),
        requests_waiting=row["resource__requests_waiting"], requests_running=row["resource__requests_running"],
        kv_cache_usage_ratio=row["resource__kv_cache_usage_ratio"],
        gpu_util=gpu_util if gpu_util is not None else row["gpu_util"], pending=pending,
        kv_events=bool(row["resource__kv_events_ok_count"]),
    )


class CandidateKeeper(PlacementKeeper):
    """This web process's board of the pool's instances (``BOARD``)."""

    model = Instance
    fields = FIELDS
    counts_placed = True
    # Distinct capabilities a board keeps apart, beyond which it forgets them and reads them again.
    MAX_FINGERPRINTS = 4096

    def reset(self):
        # fingerprint -> what those capabilities declare: a read carries the fingerprint, not the
        # capabilities (decoding them for every changed row was most of a refresh's cost).
        self._declared = {}
        # instance id -> {adapter id: parent id} its engines serve (SPEC 16.1); only instances that serve one.
        self._parents = {}
        super().reset()

    def _read_all(self):
        self._parents = {}
        super()._read_all()

    def new_board(self, capacity):
        return CandidateBoard(capacity=capacity)

    def fill(self, board, rows, old_board):
        self._declare(rows)
        super().fill(board, rows, old_board)

    def _declare(self, rows):
        """Learn what the capabilities of fingerprints not seen yet declare (one read per fingerprint)."""
        unknown = {row["capability_fingerprint"] for row in rows} - self._declared.keys() - {None}
        if len(self._declared) + len(unknown) > self.MAX_FINGERPRINTS:
            self._declared = {}
            unknown = {row["capability_fingerprint"] for row in rows} - {None}
        for fingerprint in unknown:
            capabilities = Instance.objects.filter(capability_fingerprint=fingerprint).values_list(
                "capabilities", flat=True).first()
            self._declared[fingerprint] = declared(capabilities)

    def candidate_of(self, row, old_board):
        """The row's candidate, with the pending count of the same report carried over."""
        parents = row["resource__adapter_parents"]
        if isinstance(parents, dict) and parents:
            self._parents[row["instance_id"]] = parents
        else:
            self._parents.pop(row["instance_id"], None)
        known = old_board.get(row["instance_id"])
        reported = row["resource__resource_reported_at"] if row["resource__has_raw_resource"] else None
        pending = old_board.pending_of(row["instance_id"]) if known is not None and known.reported_at == reported else 0
        return candidate_of(row, pending, self._declared.get(row["capability_fingerprint"], NOTHING_DECLARED))

    def changed_q(self, since):
        return Q(last_seen_at__gt=since) | Q(fence_changed_at__gt=since)

    def served(self):
        """``(models, adapters)`` served by some instance on the board as of its last refresh (a ``decide``'s),
        sorted: what the pool page's placement panel offers to ask for."""
        with self._lock:
            candidates = [self.board.get(instance_id) for instance_id in self.board.ids()]
        models, adapters = set(), set()
        for candidate in candidates:
            models |= candidate.models
            adapters |= candidate.adapters
        return sorted(models), sorted(adapters)

    def parent_of(self, name):
        """The base model of ``name`` when ``name`` is a LoRA adapter some instance on the board serves
        (its engines' ``served``, SPEC 16.1), else None. Refreshes the board first, as ``decide`` does."""
        with self._lock:
            self._refresh(clock.now())
            for instance_id, parents in self._parents.items():
                parent = parents.get(name)
                if parent is not None and self.board.get(instance_id) is not None:
                    return parent
        return None

    def policy(self):
        return Policy(
            ttl_s=Instance.ttl_s(), heartbeat_interval_s=Instance.heartbeat_interval_s(),
            max_age_s=settings.FLEETWATCH_PLACEMENT_MAX_AGE_S,
            waiting_scale=float(settings.FLEETWATCH_SATURATION_WAITING),
            kv_scale=float(settings.FLEETWATCH_SATURATION_KV),
            shed_pressure=settings.FLEETWATCH_PLACEMENT_SHED_PRESSURE,
        )


BOARD = CandidateKeeper()

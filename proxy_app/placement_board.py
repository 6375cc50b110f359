"""This web process's placement board (SPEC 14.1): ``proxy_app.placement.Board``, kept from the database.

A placement answer must not walk the fleet, so each web process keeps one
board and refreshes it at most every ``FLEETWATCH_PLACEMENT_REFRESH_S``
(0.25 s), by reading only the instances whose contact or fence changed
since its last read (with an overlap of ``OVERLAP_S`` for writes committed
late) and the ones unregistered or expired since. Every ``FULL_EVERY_S`` it
reads the whole pool afresh, so nothing the incremental reads could miss
lives longer. A refresh setting of 0 reads the whole pool on every request.

An answer therefore reflects reports at most the refresh interval plus a
query's time older than the newest it could have seen. Requests placed by
this process count as ``pending`` on their instance until its next report
(each web process counts its own).
"""

import threading

from django.conf import settings
from django.db.models import Q

from controlplane.endpoints.liveness import ChangeStatus
from proxy_app import fences
from proxy_app.models import Instance, InstanceStatusChange
from proxy_app.placement import Board, Candidate, Policy

OVERLAP_S = 1.0
FULL_EVERY_S = 30.0
FIELDS = (
    "instance_id", "host", "port", "endpoints", "last_seen_at", "capabilities", "gpu_util",
    "fenced", "fence_reason", "had_ok_engine",
    "resource__resource_reported_at", "resource__has_raw_resource", "resource__admission_state",
    "resource__gpu_error_count", "resource__engine_count", "resource__engine_ok_count", "resource__engine_status",
    "resource__engine_models", "resource__engine_loras", "resource__requests_waiting",
    "resource__requests_running", "resource__kv_cache_usage_ratio", "resource__gpu_util_avg",
)


def _names(values):
    return {value for value in values if isinstance(value, str) and value} if isinstance(values, list) else set()


def served(capabilities, engine_models, engine_loras):
    """``(models, adapters)`` an instance serves: its capabilities' model and adapters, its engines' models
    and running LoRAs."""
    capabilities = capabilities if isinstance(capabilities, dict) else {}
    model = capabilities.get("model") if isinstance(capabilities.get("model"), dict) else {}
    adapters = [a.get("identifier") for a in capabilities.get("adapters") or () if isinstance(a, dict)]
    return (frozenset(_names([model.get("identifier")]) | _names(engine_models)),
            frozenset(_names(adapters) | _names(engine_loras)))


def candidate_of(row, pending=0):
    """The ``Candidate`` of one row of ``FIELDS``."""
    fenced, _ = fences.effective_fence(
        row["fenced"], row["fence_reason"], row["had_ok_engine"], row["resource__engine_count"],
        row["resource__engine_ok_count"], row["resource__engine_status"], row["resource__gpu_error_count"])
    models, adapters = served(row["capabilities"], row["resource__engine_models"], row["resource__engine_loras"])
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
    )


def policy():
    return Policy(
        ttl_s=Instance.ttl_s(), heartbeat_interval_s=Instance.heartbeat_interval_s(),
        max_age_s=settings.FLEETWATCH_PLACEMENT_MAX_AGE_S,
        waiting_scale=float(settings.FLEETWATCH_SATURATION_WAITING), kv_scale=float(settings.FLEETWATCH_SATURATION_KV),
        shed_pressure=settings.FLEETWATCH_PLACEMENT_SHED_PRESSURE,
    )


class LiveBoard:
    """One per process (``BOARD``); ``decide`` refreshes it when due, answers and counts the placement."""

    def __init__(self):
        self._lock = threading.Lock()
        self.reset()

    def reset(self):
        self.board = Board()
        self.read_at = None
        self.full_at = None

    def decide(self, request, now):
        with self._lock:
            self._refresh(now)
            decision = self.board.decide(request, policy(), now)
            if decision.answered:
                self.board.placed(decision.answered[0].candidate.instance_id)
        return decision

    def _due(self, now):
        refresh_s = settings.FLEETWATCH_PLACEMENT_REFRESH_S
        return self.read_at is None or refresh_s <= 0 or not 0 <= now - self.read_at < refresh_s

    def _refresh(self, now):
        if not self._due(now):
            return
        if settings.FLEETWATCH_PLACEMENT_REFRESH_S <= 0 or self.full_at is None \
                or not 0 <= now - self.full_at < FULL_EVERY_S:
            self._read_all()
            self.full_at = now
        else:
            self._read_changed(self.read_at - OVERLAP_S)
        self.read_at = now

    def _read_all(self):
        old = self.board
        rows = list(Instance.objects.values(*FIELDS))
        board = Board(capacity=max(64, len(rows)))
        for row in rows:
            board.put(self._carried(old, row))
        self.board = board

    def _carried(self, old, row):
        """The row's candidate, with the pending count of the same report carried over."""
        known = old.get(row["instance_id"])
        carried = known is not None and known.reported_at == (
            row["resource__resource_reported_at"] if row["resource__has_raw_resource"] else None)
        return candidate_of(row, old.pending_of(row["instance_id"]) if carried else 0)

    def _read_changed(self, since):
        rows = Instance.objects.filter(Q(last_seen_at__gt=since) | Q(fence_changed_at__gt=since)).values(*FIELDS)
        seen = set()
        for row in rows:
            seen.add(row["instance_id"])
            self.board.put(self._carried(self.board, row))
        ended = set(InstanceStatusChange.objects.filter(
            at__gt=since, new_status__in=(ChangeStatus.UNREGISTERED, ChangeStatus.EXPIRED),
        ).values_list("instance_id", flat=True)) - seen
        if ended:
            back = set(Instance.objects.filter(pk__in=ended).values_list("instance_id", flat=True))
            for instance_id in ended - back:
                self.board.remove(instance_id)


BOARD = LiveBoard()

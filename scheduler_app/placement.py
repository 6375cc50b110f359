"""Which pool a request should go to (SPEC 14.3): pure, no database, no clock.

What placement knows of each proxy is a ``PoolCandidate`` (read from the
pool summary it sent last); a ``PoolBoard`` holds them as columns, as the
Proxy's board holds instances. Steps:

1. **Eligibility**, the first failing rule names the exclusion:
   ``excluded`` (in the request's ``exclude``), ``stale`` (the proxy is past
   its TTL), ``rejecting`` (its summary's ``pool_admission_state``),
   ``model`` (its summary's ``engine.models`` does not list it).
2. **Ranking**: the summary's ``engine.saturation``, lowest first, pools
   without it after those with it; then alive instances, most first; then a
   hash of the proxy id.
3. **Verdict**: ``accept`` when some eligible pool has saturation < 1 (or
   none known), ``shed`` when every one is at or over ``shed_pressure``
   (a pool's saturation is at most 1, so with the default of 2 a fleet
   queues rather than sheds), ``queue`` otherwise, ``unavailable`` when none
   is eligible.
"""

import dataclasses

import numpy as np

from controlplane.endpoints.admission import Admission
from controlplane.endpoints.liveness import alive_mask
from controlplane.endpoints.placement import Decision, Rule, Sieve, Verdict, stable_hash
from controlplane.endpoints.slots import Column, SlotColumns

REASONS = {Verdict.ACCEPT: "lowest_saturation", Verdict.QUEUE: "all_saturated",
           Verdict.SHED: "all_over_shed_pressure", Verdict.UNAVAILABLE: "no_eligible_pool"}


@dataclasses.dataclass(frozen=True)
class PoolCandidate:
    proxy_id: str
    host: str
    port: int
    last_seen_at: float
    summary_at: float | None = None  # when its latest pool summary arrived
    pool_admission_state: str | None = None
    models: frozenset = frozenset()
    saturation: float | None = None
    alive_instances: int = 0

    @property
    def key(self):
        return self.proxy_id


@dataclasses.dataclass(frozen=True)
class PoolRequest:
    model: str | None = None
    count: int = 3
    exclude: frozenset = frozenset()


@dataclasses.dataclass(frozen=True)
class PoolPolicy:
    ttl_s: float
    shed_pressure: float = 2.0


@dataclasses.dataclass(frozen=True)
class RankedPool:
    candidate: PoolCandidate
    summary_age_s: float | None
    reasons: tuple


COLUMNS = {
    "present": Column(bool, False), "last_seen": Column(np.float64, -np.inf), "rejecting": Column(bool, False),
    "saturation": Column(np.float64, np.nan), "alive": Column(np.int64, 0), "id_hash": Column(np.uint64, 0),
}


class PoolBoard:
    """Every proxy placement knows of, as columns; a fleet is small, so each decision sorts its eligible pools."""

    def __init__(self, capacity=64):
        self.columns = SlotColumns(COLUMNS, capacity)
        self._candidates = []  # by slot
        self._models = {}

    def __len__(self):
        return len(self.columns)

    def get(self, proxy_id):
        slot = self.columns.slot_of.get(proxy_id)
        return None if slot is None else self._candidates[slot]

    def put(self, candidate):
        c = self.columns
        slot, new = c.slot(candidate.proxy_id)
        if new:
            if slot == len(self._candidates):
                self._candidates.append(None)
            c.id_hash[slot] = stable_hash(candidate.proxy_id)
        old = self._candidates[slot]
        if old is None or old.models != candidate.models:
            self._models = {}
        self._candidates[slot] = candidate
        c.present[slot] = True
        c.last_seen[slot] = candidate.last_seen_at
        c.rejecting[slot] = candidate.pool_admission_state == Admission.REJECTING
        c.saturation[slot] = np.nan if candidate.saturation is None else candidate.saturation
        c.alive[slot] = candidate.alive_instances

    def remove(self, proxy_id):
        slot = self.columns.remove(proxy_id)
        if slot is not None:
            self._candidates[slot] = None
            self._models = {}

    def _serving(self, model):
        mask = self._models.get(model)
        if mask is None:
            mask = np.array([c is not None and model in c.models for c in self._candidates], dtype=bool)
            self._models[model] = mask
        return mask

    def decide(self, request, policy, now):
        size = self.columns.size
        sieve = Sieve(self.columns.present[:size], self.columns.slot_of, request.exclude)
        sieve.drop(Rule.STALE.value, ~alive_mask(self.columns.last_seen[:size], now, policy.ttl_s))
        sieve.drop(Rule.REJECTING.value, self.columns.rejecting[:size])
        if request.model is not None:
            sieve.drop(Rule.MODEL.value, ~self._serving(request.model))
        remaining, excluded = sieve.remaining, sieve.excluded()
        eligible = np.flatnonzero(remaining)
        if not len(eligible):
            return Decision(Verdict.UNAVAILABLE, REASONS[Verdict.UNAVAILABLE], len(self), 0, excluded, [])
        saturation = self.columns.saturation[eligible]
        unknown = np.isnan(saturation)
        c = self.columns
        order = np.lexsort((c.id_hash[eligible], -c.alive[eligible], np.nan_to_num(saturation, nan=0.0), unknown))
        best = order[:request.count].tolist()
        if unknown.any() or saturation[~unknown].min() < 1:
            verdict = Verdict.ACCEPT
        elif saturation.min() >= policy.shed_pressure:
            verdict = Verdict.SHED
        else:
            verdict = Verdict.QUEUE
        ranked = [self._ranked(eligible[p], now) for p in best]
        return Decision(verdict, REASONS[verdict], len(self), len(eligible), excluded, ranked)

    def _ranked(self, slot, now):
        candidate = self._candidates[slot]
        reasons = ("saturation",) if candidate.saturation is not None else ("no_saturation_signal",)
        age = None if candidate.summary_at is None else round(max(0.0, now - candidate.summary_at), 3)
        return RankedPool(candidate, age, reasons)


def decide(candidates, request, policy, now):
    """Rank ``candidates`` for ``request`` at ``now`` on a board of their own."""
    board = PoolBoard(capacity=max(1, len(candidates)))
    for candidate in candidates:
        board.put(candidate)
    return board.decide(request, policy, now)

"""Where a request should go, and whether the pool should take it now (SPEC 14.1): a pure function.

Plain rows in (``Candidate``, one per instance), ranked candidates and a
verdict out; nothing here touches the database or the clock, so every rule
is tested with plain values (``tests/proxy/test_placement_decision.py``) and
the worked examples of ``docs/placement.md`` are those tests. Steps:

1. **Eligibility**, each rule in turn; the first that fails names the
   instance's exclusion (``excluded`` counts them per rule): ``excluded``
   (in the request's ``exclude``), ``stale`` (past its TTL), ``fenced``,
   ``rejecting`` (its stored admission state), ``gpu_error`` (a GPU whose
   health is ``error``), ``model`` and ``adapter`` (it does not serve them),
   then ``signal_stale`` (its latest snapshot is older than ``max_age_s``).
   If nothing is eligible only because of ``signal_stale``, the stale ones
   are used and the reason says ``fail_open_stale``: a pool never goes dark
   because its telemetry did.
2. **Pressure** of an eligible instance: with an ``ok`` engine,
   ``max((waiting + pending) / W, kv_usage / K)``; without one, its GPU
   utilisation ÷ 100 (plus ``pending / W``), ranked after every instance
   with an engine signal; with neither, no pressure, ranked last.
   ``pending`` counts requests this Proxy placed there that no report shows
   yet, so equal instances do not all get the next second's requests.
3. **Ranking**: signal tier, pressure, running requests, signal age, then
   a hash of the instance id (deterministic for the same state and body).
   With a ``session_key``, the instance that rendezvous hashing picks for
   the key among the eligible ones with pressure < 1 goes first
   (``affinity_pick``).
4. **Verdict**: ``accept`` when some eligible instance has pressure < 1 (or
   none known), ``shed`` when every one is at or over ``shed_pressure``,
   ``queue`` otherwise, ``unavailable`` when none is eligible.
"""

import dataclasses
import enum
import hashlib

from controlplane.endpoints import liveness

ENGINE_TIER, GPU_TIER, NO_SIGNAL_TIER = 0, 1, 2


class Verdict(enum.Enum):
    ACCEPT = "accept"
    QUEUE = "queue"
    SHED = "shed"
    UNAVAILABLE = "unavailable"

    @property
    def http_status(self):
        return {"accept": 200, "queue": 200, "shed": 429, "unavailable": 503}[self.value]


class Rule(enum.Enum):
    """Why an instance was not eligible, in the order the rules are checked."""

    EXCLUDED = "excluded"
    STALE = "stale"
    FENCED = "fenced"
    REJECTING = "rejecting"
    GPU_ERROR = "gpu_error"
    MODEL = "model"
    ADAPTER = "adapter"
    SIGNAL_STALE = "signal_stale"


@dataclasses.dataclass(frozen=True)
class Candidate:
    """What placement knows of one instance."""

    instance_id: str
    host: str
    port: int
    last_seen_at: float
    reported_at: float | None = None  # the latest snapshot's receive time
    endpoints: tuple = ()
    admission_state: str | None = None
    gpu_error: bool = False
    fenced: bool = False
    models: frozenset = frozenset()
    adapters: frozenset = frozenset()
    engine_ok: bool = False
    requests_waiting: int | None = None
    requests_running: int | None = None
    kv_cache_usage_ratio: float | None = None
    gpu_util: float | None = None  # 0-100
    pending: int = 0  # placed here by this Proxy since its latest report


@dataclasses.dataclass(frozen=True)
class Request:
    model: str | None = None
    adapter: str | None = None
    prompt_tokens: int | None = None
    max_tokens: int | None = None
    session_key: str | None = None
    count: int = 3
    exclude: frozenset = frozenset()


@dataclasses.dataclass(frozen=True)
class Policy:
    ttl_s: float
    heartbeat_interval_s: float
    max_age_s: float = 2.0
    waiting_scale: float = 5.0  # W
    kv_scale: float = 0.8  # K
    shed_pressure: float = 2.0


@dataclasses.dataclass(frozen=True)
class Ranked:
    candidate: Candidate
    tier: int
    pressure: float | None
    signal_age_s: float | None
    reasons: tuple


@dataclasses.dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str
    considered: int
    eligible: int
    excluded: dict
    ranked: list  # every eligible instance, best first (``count`` of them are answered)


def _first_failed_rule(candidate, request, policy, now):
    if candidate.instance_id in request.exclude:
        return Rule.EXCLUDED
    if liveness.status_at(candidate.last_seen_at, now, policy.ttl_s, policy.heartbeat_interval_s) \
            is liveness.Status.STALE:
        return Rule.STALE
    if candidate.fenced:
        return Rule.FENCED
    if candidate.admission_state == "rejecting":
        return Rule.REJECTING
    if candidate.gpu_error:
        return Rule.GPU_ERROR
    if request.model is not None and request.model not in candidate.models:
        return Rule.MODEL
    if request.adapter is not None and request.adapter not in candidate.adapters:
        return Rule.ADAPTER
    if candidate.reported_at is None or now - candidate.reported_at > policy.max_age_s:
        return Rule.SIGNAL_STALE
    return None


def pressure_of(candidate, policy):
    """``(tier, pressure, reasons)``: how loaded an instance is, and from which signal
    (rounded to 6 decimals, so 0.6 / 0.8 reads 0.75 in answers and ties are ties)."""
    queued = candidate.pending / policy.waiting_scale
    if candidate.engine_ok and (candidate.requests_waiting is not None or candidate.kv_cache_usage_ratio is not None):
        waiting = ((candidate.requests_waiting or 0) + candidate.pending) / policy.waiting_scale
        kv = (candidate.kv_cache_usage_ratio or 0.0) / policy.kv_scale
        reason = "queue" if waiting >= kv else "kv_cache"
        return ENGINE_TIER, round(max(waiting, kv), 6), (f"pressure_from_{reason}",)
    if candidate.gpu_util is not None:
        return GPU_TIER, round(candidate.gpu_util / 100.0 + queued, 6), ("pressure_from_gpu_util", "no_engine_signal")
    return NO_SIGNAL_TIER, None, ("no_load_signal",)


def _stable_hash(*parts):
    """A 64-bit hash that is the same in every process (Python's ``hash`` of a str is not)."""
    digest = hashlib.blake2b("\x00".join(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _rank_key(ranked):
    candidate = ranked.candidate
    return (
        ranked.tier,
        ranked.pressure if ranked.pressure is not None else 0.0,
        candidate.requests_running if candidate.requests_running is not None else 0,
        ranked.signal_age_s if ranked.signal_age_s is not None else float("inf"),
        _stable_hash(candidate.instance_id),
        candidate.instance_id,
    )


def affinity_pick(session_key, ranked):
    """The instance a session key sticks to: rendezvous hashing with bounded load.

    Every eligible instance is ordered by the hash of (key, instance id); the
    first whose pressure is below 1 wins. A key therefore keeps its instance
    while that instance stays eligible and unsaturated, whatever happens to
    the others, and moves only to the next in its own order when it fills up.
    """
    by_hash = sorted(ranked, key=lambda item: (_stable_hash(session_key, item.candidate.instance_id),
                                               item.candidate.instance_id), reverse=True)
    return next((item for item in by_hash if item.pressure is None or item.pressure < 1), None)


def _verdict(ranked, policy):
    pressures = [item.pressure for item in ranked]
    if any(pressure is None or pressure < 1 for pressure in pressures):
        return Verdict.ACCEPT
    if all(pressure >= policy.shed_pressure for pressure in pressures):
        return Verdict.SHED
    return Verdict.QUEUE


REASONS = {Verdict.ACCEPT: "lowest_pressure", Verdict.QUEUE: "all_saturated",
           Verdict.SHED: "all_over_shed_pressure", Verdict.UNAVAILABLE: "no_eligible_instance"}


def decide(candidates, request, policy, now):
    """Rank ``candidates`` for ``request`` at ``now``; see the module's steps."""
    excluded = {}
    eligible, signal_stale = [], []
    for candidate in candidates:
        rule = _first_failed_rule(candidate, request, policy, now)
        if rule is None:
            eligible.append(candidate)
        elif rule is Rule.SIGNAL_STALE:
            signal_stale.append(candidate)
        else:
            excluded[rule.value] = excluded.get(rule.value, 0) + 1
    fail_open = not eligible and bool(signal_stale)
    if fail_open:
        eligible = signal_stale
    elif signal_stale:
        excluded[Rule.SIGNAL_STALE.value] = len(signal_stale)
    ranked = []
    for candidate in eligible:
        tier, pressure, reasons = pressure_of(candidate, policy)
        age = None if candidate.reported_at is None else round(max(0.0, now - candidate.reported_at), 3)
        if fail_open:
            reasons += ("signal_stale",)
        ranked.append(Ranked(candidate, tier, pressure, age, reasons))
    ranked.sort(key=_rank_key)
    if request.session_key is not None and ranked:
        sticky = affinity_pick(request.session_key, ranked)
        if sticky is not None:
            ranked.remove(sticky)
            ranked.insert(0, dataclasses.replace(sticky, reasons=sticky.reasons + ("session_affinity",)))
    verdict = _verdict(ranked, policy) if ranked else Verdict.UNAVAILABLE
    reason = "fail_open_stale" if fail_open else REASONS[verdict]
    if verdict is Verdict.ACCEPT and not fail_open and ranked and "session_affinity" in ranked[0].reasons:
        reason = "session_affinity"
    return Decision(verdict, reason, len(candidates), len(eligible), dict(sorted(excluded.items())), ranked)


def answered(decision, count):
    """The candidates an answer carries: the best ``count``, none when shedding or unavailable."""
    if decision.verdict in (Verdict.SHED, Verdict.UNAVAILABLE):
        return []
    return decision.ranked[:count]

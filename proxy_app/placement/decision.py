"""Where a request should go, and whether the pool should take it now (SPEC 14.1): pure, no database, no clock.

What placement knows of each instance is a ``Candidate`` (``proxy_app.placement.inputs``,
with the ``Request`` and the ``Policy``); a ``CandidateBoard`` holds them as
columns (one numpy array per field, one slot per instance), so a decision
over 10,000 instances is a few vector operations, not a walk of the fleet in
Python. What moves only with a report or a placement (each instance's
pressure, and its ranking key but for the signal's age) is worked out for
that instance when it moves, not for the whole board per decision.
``CandidateBoard.decide(request, policy, now)`` answers; the plain
``decide(candidates, …)`` builds a board and asks it (the tests and the
worked examples of ``docs/placement.md`` use it). Steps:

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
   ``pending`` counts requests this board placed there since the
   instance's latest report, so equal instances do not all get the next
   second's requests. It orders the ranking only: the verdict and session
   affinity read the pressure the reports show (many of those requests are
   done by the next report, and a router's own rate must not shed a pool).
3. **Ranking**: signal tier, pressure (to 10⁻⁶), running requests (to
   1,023), signal age (to 10 ms, up to 655 s), then a hash of the instance
   id, then the id: deterministic for the same state and body. With a
   ``session_key``, the instance that rendezvous hashing picks for the key
   among the eligible ones with pressure < 1 goes first (bounded-load
   affinity: a key keeps its instance while that one stays eligible and
   unsaturated, and keys spread evenly over equal instances).
   **With a prompt** (SPEC 15.5), the pressure in that key is replaced by
   ``proxy_app.placement.prefix_cost``'s cost, which falls with the prompt's
   leading blocks an instance holds (``prefix_hits``, asked of the index the
   ``prefix_source`` names: ``events`` when some eligible instance publishes
   its engine's KV-cache events, else ``placements``, learned mode); no hit
   anywhere leaves 14.1's key as it is. A session key then sticks among the
   unsaturated instances holding the longest cached prefix (all of them when
   none holds any): the cache decides where a session's prompt is cheapest,
   the key spreads sessions evenly among the equally cached.
4. **Verdict**: ``accept`` when some eligible instance has pressure < 1 (or
   no known pressure), ``shed`` when every one is at or over
   ``shed_pressure``, ``queue`` otherwise, ``unavailable`` when none is
   eligible.
"""

import numpy as np

from controlplane.endpoints.admission import Admission
from controlplane.endpoints.liveness import alive_mask
from controlplane.endpoints.placement import REASONS, Decision, Rule, Sieve, Verdict, stable_hash
from controlplane.endpoints.slots import Column, SlotColumns
from proxy_app.placement.derived import ENGINE_TIER, FEW_SLOTS, GPU_TIER, NO_SIGNAL_TIER, derive, derive_slot
from proxy_app.placement.inputs import Ranked
from proxy_app.placement.prefix_cost import WEIGHT_MICROS
from proxy_app.placement.ranking_key import MAX_PRESSURE_MICROS, age_centis, with_prefix_cost

# Where a prompt's cached prefix is read from (SPEC 15.5 ``prefix_source``).
EVENTS, PLACEMENTS = "events", "placements"


def _mix(values):
    """splitmix64's finaliser over uint64s: every input bit moves every output bit."""
    values = values ^ (values >> np.uint64(30))
    values = values * np.uint64(0xBF58476D1CE4E5B9)
    values = values ^ (values >> np.uint64(27))
    values = values * np.uint64(0x94D049BB133111EB)
    return values ^ (values >> np.uint64(31))


COLUMNS = {
    "last_seen": Column(np.float64, -np.inf), "reported": Column(np.float64, np.nan),
    "fenced": Column(bool, False), "rejecting": Column(bool, False), "gpu_error": Column(bool, False),
    "tier": Column(np.int64, NO_SIGNAL_TIER), "waiting": Column(np.float64, 0.0), "kv": Column(np.float64, 0.0),
    "gpu_util": Column(np.float64, 0.0), "running": Column(np.int64, 0), "pending": Column(np.int64, 0),
    "id_hash": Column(np.uint64, 0), "present": Column(bool, False), "kv_events": Column(bool, False),
    # Derived from the columns above (``proxy_app.placement.derived``) for the policy's scales, per slot as it changes (a report, a
    # placement) rather than over the whole board per decision: the pressure with and without ``pending``,
    # whether the queue sets it, and the ranking key without the signal's age (which moves with ``now``).
    "pressure": Column(np.float64, np.nan), "reported_pressure": Column(np.float64, np.nan),
    "from_queue": Column(bool, False), "rank": Column(np.int64, 0),
}



class CandidateBoard:
    """Every instance placement knows of, as columns (``SlotColumns``); slots are reused after ``remove``."""

    def __init__(self, capacity=64):
        self.columns = SlotColumns(COLUMNS, capacity)
        self._candidates = []  # by slot
        self._filters = {}  # ("model" | "adapter", name) -> bool array over the slots
        self._scales = None  # the (W, K) the derived columns were computed for
        self._dirty = set()  # slots put or placed since: their derived columns are due

    def __len__(self):
        return len(self.columns)

    def __contains__(self, instance_id):
        return instance_id in self.columns

    def get(self, instance_id):
        slot = self.columns.slot_of.get(instance_id)
        return None if slot is None else self._candidates[slot]

    def ids(self):
        return self.columns.keys()

    def put(self, candidate):
        """Add or replace an instance. Its pending count starts again when its report is a newer one."""
        c = self.columns
        slot, new = c.slot(candidate.instance_id)
        old = None
        if new:
            if slot == len(self._candidates):
                self._candidates.append(None)
            c.id_hash[slot] = stable_hash(candidate.instance_id)
            self._filters = {}
        else:
            old = self._candidates[slot]
            if old.models != candidate.models or old.adapters != candidate.adapters:
                self._filters = {}
        self._candidates[slot] = candidate
        c.present[slot] = True
        c.last_seen[slot] = candidate.last_seen_at
        c.reported[slot] = np.nan if candidate.reported_at is None else candidate.reported_at
        c.fenced[slot] = candidate.fenced
        c.rejecting[slot] = candidate.admission_state == Admission.REJECTING
        c.gpu_error[slot] = candidate.gpu_error
        c.kv_events[slot] = candidate.kv_events
        engine_signal = candidate.engine_ok and (
            candidate.requests_waiting is not None or candidate.kv_cache_usage_ratio is not None)
        c.tier[slot] = ENGINE_TIER if engine_signal else GPU_TIER if candidate.gpu_util is not None \
            else NO_SIGNAL_TIER
        c.waiting[slot] = candidate.requests_waiting or 0
        c.kv[slot] = candidate.kv_cache_usage_ratio or 0.0
        c.gpu_util[slot] = candidate.gpu_util or 0.0
        c.running[slot] = candidate.requests_running or 0
        if old is None or old.reported_at != candidate.reported_at:
            c.pending[slot] = candidate.pending
        else:
            c.pending[slot] = max(int(c.pending[slot]), candidate.pending)
        self._dirty.add(slot)

    def remove(self, instance_id):
        slot = self.columns.remove(instance_id)
        if slot is not None:
            self._candidates[slot] = None
            self._filters = {}

    def pending_of(self, instance_id):
        slot = self.columns.slot_of.get(instance_id)
        return 0 if slot is None else int(self.columns.pending[slot])

    def placed(self, instance_id):
        """A request went to ``instance_id``: count it until that instance's next report."""
        slot = self.columns.slot_of.get(instance_id)
        if slot is not None:
            self.columns.pending[slot] += 1
            self._dirty.add(slot)

    def _filter(self, kind, name):
        key = (kind, name)
        mask = self._filters.get(key)
        if mask is None:
            mask = np.zeros(self.columns.size, dtype=bool)
            for slot, candidate in enumerate(self._candidates):
                if candidate is not None and name in getattr(candidate, kind + "s"):
                    mask[slot] = True
            self._filters[key] = mask
        return mask

    def _eligibility(self, request, policy, now):
        """(eligible slots, the same as a mask over the board's slots, fail_open, excluded counts): step 1."""
        size = self.columns.size
        sieve = Sieve(self.columns.present[:size], self.columns.slot_of, request.exclude)
        sieve.drop(Rule.STALE.value, ~alive_mask(self.columns.last_seen[:size], now, policy.ttl_s))
        sieve.drop(Rule.FENCED.value, self.columns.fenced[:size])
        sieve.drop(Rule.REJECTING.value, self.columns.rejecting[:size])
        sieve.drop(Rule.GPU_ERROR.value, self.columns.gpu_error[:size])
        if request.model is not None:
            sieve.drop(Rule.MODEL.value, ~self._filter("model", request.model))
        if request.adapter is not None:
            sieve.drop(Rule.ADAPTER.value, ~self._filter("adapter", request.adapter))
        remaining, excluded = sieve.remaining, sieve.excluded()
        with np.errstate(invalid="ignore"):
            fresh = now - self.columns.reported[:size] <= policy.max_age_s
        mask = remaining & fresh
        eligible = np.flatnonzero(mask)
        signal_stale = int(np.count_nonzero(remaining)) - len(eligible)
        fail_open = not len(eligible) and signal_stale > 0
        if fail_open:
            mask = remaining
            eligible = np.flatnonzero(mask)
        elif signal_stale:
            excluded[Rule.SIGNAL_STALE.value] = signal_stale
        return eligible, mask, fail_open, dict(sorted(excluded.items()))

    def _derive(self, policy):
        """Bring the derived columns up to date for ``policy``'s scales: every slot when they changed, else the
        slots put or placed since the last decision (a few, against the whole board's ten thousand)."""
        scales = (policy.waiting_scale, policy.kv_scale)
        if scales != self._scales:
            slots = np.arange(self.columns.size)
            self._scales = scales
        elif len(self._dirty) > FEW_SLOTS:
            slots = np.fromiter(self._dirty, np.int64, len(self._dirty))
        else:
            for slot in self._dirty:
                derive_slot(self.columns, slot, policy)
            self._dirty = set()
            return
        self._dirty = set()
        derive(self.columns, slots, policy)

    def _ranked_first(self, request, slots, hits, held, prompt_blocks, now):
        """Positions in ``slots`` of the ``request.count`` best (step 3), best first.

        A key is an instance's ``rank`` (derived as it changes) then its signal's age: only the instances whose
        rank is at most the ``count``-th smallest can be among the best, so the age is worked out for those, not
        for the whole board. With a prompt (``hits``) the pressure's place in the key holds ``prefix_cost``'s
        cost. An instance without a hit costs its pressure plus the weight (plus the weight again when
        saturated, which it already ranks after), and a hit only lowers that: an instance those best ranks
        pass stays behind them. So the cost is worked out for them and the instances with a hit (at positions
        ``held``), save where a cost could reach the key's cap (some pressure on the board near 34,000) and tie
        what 14.1 ranked apart: then for all.
        """
        count, rank = request.count, self.columns.rank[slots]
        if len(slots) > count:
            near = np.flatnonzero(rank <= np.partition(rank, count - 1)[count - 1])
        else:
            near = np.arange(len(slots))
        if hits is not None:
            highest = np.fmax.reduce(self.columns.pressure[:self.columns.size], initial=0.0)
            near = np.union1d(held, near) if highest * 1e6 < MAX_PRESSURE_MICROS - 2 * WEIGHT_MICROS \
                else np.arange(len(slots))
        keys = rank[near] | age_centis(now, self.columns.reported[slots[near]])
        if hits is not None:
            keys = with_prefix_cost(keys, self.columns.pressure[slots[near]], hits[near], prompt_blocks)
        return near[self._best(slots[near], keys, count)].tolist()

    def _best(self, slots, keys, count):
        """Positions in ``slots`` of the ``count`` best keys, best first (ties by id hash, then id)."""
        if len(slots) > count:
            cut = np.partition(keys, count - 1)[count - 1]
            better = np.flatnonzero(keys < cut)
            tied = np.flatnonzero(keys == cut)
            positions = [*better.tolist(), *tied.tolist()] if len(better) + len(tied) <= 4 * count \
                else [*better.tolist(), *self._first_by_hash(slots, tied, count - len(better))]
        else:
            positions = list(range(len(slots)))
        positions.sort(key=lambda p: (int(keys[p]), int(self.columns.id_hash[slots[p]]),
                                      self._candidates[slots[p]].instance_id))
        return positions[:count]

    def _first_by_hash(self, slots, positions, need):
        """The first ``need`` of ``positions`` by (id hash, id): a partition of the hashes keeps those that can be
        among them (the ``need`` smallest, and any equal to the last), and only those are sorted in Python."""
        hashes = self.columns.id_hash[slots[positions]]
        if need < len(positions):
            positions = positions[hashes <= np.partition(hashes, need - 1)[need - 1]]
        return sorted(positions.tolist(), key=lambda p: (int(self.columns.id_hash[slots[p]]),
                                                         self._candidates[slots[p]].instance_id))[:need]

    def _affinity(self, session_key, slots, pressure, hits=None):
        """The position in ``slots`` a session key sticks to (rendezvous hashing over the unsaturated, and with
        ``hits`` over those of them holding the longest cached prefix), or None."""
        open_ = np.isnan(pressure) | (pressure < 1)
        if hits is not None and open_.any():
            open_ &= hits == hits[open_].max()
        if not open_.any():
            return None
        scores = _mix(self.columns.id_hash[slots] ^ np.uint64(stable_hash(session_key)))
        scores[~open_] = 0
        best = int(np.argmax(scores))
        return best if open_[best] else None

    def prefix_source(self, eligible):
        """Where a prompt's cached prefix is read from, the eligible slots given as a mask (SPEC 15.5)."""
        return EVENTS if (self.columns.kv_events[:self.columns.size] & eligible).any() else PLACEMENTS

    def _hits(self, request, eligible, mask, prefix_hits):
        """(prompt blocks, source, cached blocks per eligible position, the positions with a hit); the last two
        None when no eligible instance holds any. The index names a few instances: only those are looked up."""
        if request.prompt_keys is None:
            return None, None, None, None
        blocks, source = len(request.prompt_keys), self.prefix_source(mask)
        found = prefix_hits(source, request.prompt_keys) if prefix_hits is not None and request.prompt_keys else {}
        slot_of = self.columns.slot_of
        held = [(slot_of[instance_id], count) for instance_id, count in found.items()
                if count and instance_id in slot_of]
        if held:
            slots, counts = np.array(held, dtype=np.int64).T
            eligible_held = mask[slots]
            slots, counts = slots[eligible_held], counts[eligible_held]
        if not held or not len(slots):
            return blocks, source, None, None
        positions = np.searchsorted(eligible, slots)  # ``eligible`` is sorted and holds each of ``slots``
        hits = np.zeros(len(eligible), np.int64)
        hits[positions] = counts
        return blocks, source, hits, positions

    def decide(self, request, policy, now, prefix_hits=None):
        """Rank the board for ``request`` at ``now``; see the module's steps. ``prefix_hits(source, keys)``:
        ``{instance_id: leading blocks held}`` from the pool's prefix index, asked only with a prompt."""
        eligible, mask, fail_open, excluded = self._eligibility(request, policy, now)
        considered = len(self)
        if not len(eligible):
            source = None if request.prompt_keys is None else PLACEMENTS
            blocks = None if request.prompt_keys is None else len(request.prompt_keys)
            return Decision(Verdict.UNAVAILABLE, REASONS[Verdict.UNAVAILABLE], considered, 0, excluded, [],
                            blocks, source)
        self._derive(policy)
        reported = self.columns.reported_pressure[eligible]
        prompt_blocks, source, hits, held = self._hits(request, eligible, mask, prefix_hits)
        best = self._ranked_first(request, eligible, hits, held, prompt_blocks, now)
        sticky = None if request.session_key is None else self._affinity(request.session_key, eligible, reported,
                                                                         hits)
        if sticky is not None:
            best = [sticky, *(p for p in best if p != sticky)][:request.count]
        ranked = [self._ranked(eligible[p], now, fail_open, p == sticky, 0 if hits is None else int(hits[p]))
                  for p in best]
        verdict = _verdict(reported, policy)
        reason = "fail_open_stale" if fail_open else REASONS[verdict]
        if verdict is Verdict.ACCEPT and not fail_open and sticky is not None:
            reason = "session_affinity"
        return Decision(verdict, reason, considered, len(eligible), excluded, ranked, prompt_blocks, source)

    def _ranked(self, slot, now, fail_open, sticky, hit_blocks=0):
        candidate, pressure = self._candidates[slot], self.columns.pressure[slot]
        tier = int(self.columns.tier[slot])
        if tier == ENGINE_TIER:
            reasons = ("pressure_from_queue" if self.columns.from_queue[slot] else "pressure_from_kv_cache",)
        elif tier == GPU_TIER:
            reasons = ("pressure_from_gpu_util", "no_engine_signal")
        else:
            reasons = ("no_load_signal",)
        if fail_open:
            reasons += ("signal_stale",)
        if sticky:
            reasons += ("session_affinity",)
        if hit_blocks:
            reasons += ("prefix_cache_hit",)
        reported = candidate.reported_at
        age = None if reported is None else round(max(0.0, now - reported), 3)
        return Ranked(candidate, tier, None if np.isnan(pressure) else round(float(pressure), 6), age, reasons,
                      hit_blocks)


def _verdict(pressure, policy):
    """Step 4 over every eligible instance's pressure (NaN: none known)."""
    lowest = pressure.min()  # NaN when some instance's is
    if np.isnan(lowest) or lowest < 1:
        return Verdict.ACCEPT
    if lowest >= policy.shed_pressure:
        return Verdict.SHED
    return Verdict.QUEUE


def decide(candidates, request, policy, now, prefix_hits=None):
    """Rank ``candidates`` for ``request`` at ``now`` on a board of their own."""
    board = CandidateBoard(capacity=max(1, len(candidates)))
    for candidate in candidates:
        board.put(candidate)
    return board.decide(request, policy, now, prefix_hits)

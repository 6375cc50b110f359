"""The pool's prefix index in one process's memory (SPEC 15.4): pure, numpy only, no database, no clock.

``PrefixIndex`` answers "how many of this prompt's leading block keys does
each instance hold?" for the keys the engines' events reported. Its layout is
chosen for memory (``nbytes``; docs/placement.md states it per million keys):

- a **base**: every (key, slot) pair as two sorted numpy columns, an int64
  key and an int32 slot, 12 bytes a pair, looked up by binary search;
- a **delta** of the changes since the last merge (Python dicts, key → slot
  or set of slots, for the added pairs and for the removed ones), merged into
  the base once it holds ``MERGE_MIN`` pairs or 1/``MERGE_FRACTION`` of the
  base, so its memory stays a small share of the base's;
- a **slot** per engine stream (its ``PrefixEngine`` id): a reset or a drop
  gives the engine a new slot and marks the old one dead, so forgetting an
  engine's whole set costs nothing until the next merge sweeps it out.

``LearnedIndex`` holds what learned mode recorded (SPEC 15.5): keys placed on
an instance until a deadline; small, a dict.
"""

import numpy as np

try:
    # ``hits``' walk in C (proxy_app/prefix/_runs.c), built by ``pip install`` where a C compiler is; else numpy.
    from proxy_app.prefix._runs import leading_runs as compiled_runs
except ImportError:  # pragma: no cover - installed without a C compiler: the same answers, slower
    compiled_runs = None

MERGE_MIN = 65536
MERGE_FRACTION = 32
FIRST_CHUNK = 16  # the lookup's first search: a prompt's first 16 keys (``PrefixIndex._held_run``)


def _put(table, key, slot):
    held = table.get(key)
    if held is None:
        table[key] = slot
    elif isinstance(held, set):
        held.add(slot)
    elif held != slot:
        table[key] = {held, slot}


def _take(table, key, slot):
    """Remove ``slot`` from ``table[key]``; whether it was there."""
    held = table.get(key)
    if held is None:
        return False
    if isinstance(held, set):
        if slot not in held:
            return False
        held.discard(slot)
        if len(held) == 1:
            table[key] = next(iter(held))
        return True
    if held == slot:
        del table[key]
        return True
    return False


def _slots(held):
    return () if held is None else held if isinstance(held, set) else (held,)


def leading_runs(positions, slots, length, ordered=False):
    """``{slot: run}`` from (position, slot) pairs: how many of positions 0, 1, 2 … each slot holds in a row.
    ``ordered``: the pairs come by position, each once (a stable sort by slot then suffices)."""
    if not len(positions):
        return {}
    if ordered:
        order = np.argsort(slots, kind="stable")
        slots, positions = slots[order], positions[order]
    else:
        order = np.lexsort((positions, slots))
        slots, positions = slots[order], positions[order]
        distinct = np.r_[True, (slots[1:] != slots[:-1]) | (positions[1:] != positions[:-1])]
        slots, positions = slots[distinct], positions[distinct]
    change = np.empty(len(slots), bool)
    change[0] = True
    np.not_equal(slots[1:], slots[:-1], out=change[1:])
    starts = np.flatnonzero(change)
    sizes = np.append(starts[1:], len(slots)) - starts
    rank = np.arange(len(slots)) - np.repeat(starts, sizes)
    broken = np.where(positions != rank, rank, length)  # the first rank whose position is not its own
    runs = np.minimum(np.minimum.reduceat(broken, starts), sizes)
    return {int(slot): int(run) for slot, run in zip(slots[starts], runs) if run > 0}


class PrefixIndex:
    """Which engine streams hold which keys; see the module."""

    def __init__(self):
        self.keys = np.empty(0, np.int64)
        self.slots = np.empty(0, np.int32)
        self.added, self.removed = {}, {}
        self.delta = 0
        self.slot_of = {}  # stream (PrefixEngine id) -> slot
        self.owner = []  # slot -> instance id, None when dead
        self.dead = np.zeros(64, bool)

    def __len__(self):
        """Pairs held (the base's, less nothing dead is subtracted until a merge, plus the delta's additions)."""
        return len(self.keys) + self.delta

    def streams(self):
        return set(self.slot_of)

    def nbytes(self):
        """Bytes this index holds: the base's columns and an estimate of the delta's dicts (~100 bytes a pair)."""
        return int(self.keys.nbytes + self.slots.nbytes + self.dead.nbytes + 100 * self.delta
                   + 120 * len(self.owner))

    def _new_slot(self, stream, instance_id):
        slot = len(self.owner)
        self.owner.append(instance_id)
        if slot >= len(self.dead):
            self.dead = np.r_[self.dead, np.zeros(len(self.dead), bool)]
        self.slot_of[stream] = slot
        return slot

    def drop(self, stream):
        """Forget every key of a stream (its engine reset, or its instance left)."""
        slot = self.slot_of.pop(stream, None)
        if slot is not None:
            self.dead[slot] = True
            self.owner[slot] = None

    def apply(self, stream, instance_id, added=(), removed=(), reset=False, merge=True):
        """One body's change (SPEC 15.3): with ``reset`` the stream's keys are first forgotten; ``added`` applies
        before ``removed``, as the store applies them, so a key in both is not held after. ``merge``: fold
        the delta into the base when it is due (``merge_due``); a caller that merges apart passes False."""
        if reset:
            self.drop(stream)
        slot = self.slot_of.get(stream)
        if slot is None:
            slot = self._new_slot(stream, instance_id)
        for key in added:
            key = int(key)
            _take(self.removed, key, slot)
            _put(self.added, key, slot)
            self.delta += 1
        for key in removed:
            key = int(key)
            if _take(self.added, key, slot):
                self.delta -= 1
                if not self._in_base(key, slot):
                    continue  # the delta's own pair, gone with it
                # added again while the base held it: the base's pair goes too
            _put(self.removed, key, slot)
            self.delta += 1
        if merge and self.merge_due():
            self.merge()

    def merge_due(self):
        return self.delta >= max(MERGE_MIN, len(self.keys) // MERGE_FRACTION)

    def load(self, owners, slots, keys):
        """A whole index at once (a rebuild from the table): ``owners`` lists ``(stream, instance_id)``, and pair
        ``i`` is key ``keys[i]`` held by the stream at position ``slots[i]`` of that list."""
        self.__init__()
        for stream, instance_id in owners:
            self._new_slot(stream, instance_id)
        if len(keys):
            self._set_base(np.asarray(keys, np.int64), np.asarray(slots, np.int32))

    def _set_base(self, keys, slots):
        order = np.lexsort((slots, keys))
        keys, slots = keys[order], slots[order]
        if len(keys) > 1:
            distinct = np.r_[True, (keys[1:] != keys[:-1]) | (slots[1:] != slots[:-1])]
            keys, slots = keys[distinct], slots[distinct]
        self.keys, self.slots = keys, slots

    def merge(self):
        """Fold the delta into the base, sweep dead slots out and number the live ones afresh.

        Linear in the base (one deletion, one insertion), never a sort of it: the delta's pairs are found and
        placed by binary search (``_find``).
        """
        self.install(self.merged())

    def merged(self):
        """``merge``'s result, without changing this index: what ``install`` puts in place. It only reads, so
        lookups may go on beside it while nothing else changes the index (``proxy_app.prefix.keeper``)."""
        keys, slots = self.keys, self.slots
        dropped = []
        if self.removed:
            at, found = self._find(*self._pairs(self.removed))
            dropped.append(at[found])
        if self.dead.any():
            dropped.append(np.flatnonzero(self.dead[slots]))
        dropped = np.unique(np.concatenate(dropped)) if dropped else np.zeros(0, np.int64)
        new_keys, new_slots = self._pairs(self.added, skip_dead=True)
        at, found = self._find(new_keys, new_slots)
        new_keys, new_slots, at = new_keys[~found], new_slots[~found], at[~found]
        order = np.lexsort((new_slots, new_keys, at))
        at = at[order] - np.searchsorted(dropped, at[order])  # the dropped pairs before each insertion point
        if len(dropped):
            keys, slots = np.delete(keys, dropped), np.delete(slots, dropped)
        if len(at):
            keys = np.insert(keys, at, new_keys[order])
            slots = np.insert(slots, at, new_slots[order].astype(np.int32))
        owner, slot_of, dead = self.owner, self.slot_of, self.dead
        live = [slot for slot in range(len(owner)) if owner[slot] is not None]
        if len(live) < len(owner):
            renumber = np.zeros(len(dead), np.int32)
            renumber[live] = np.arange(len(live), dtype=np.int32)  # in order: the columns stay sorted
            slots = renumber[slots]
            owner = [owner[slot] for slot in live]
            slot_of = {stream: int(renumber[slot]) for stream, slot in slot_of.items()}
            dead = np.zeros(max(64, 2 * len(live)), bool)
        return keys, slots, owner, slot_of, dead

    def install(self, merged):
        """Put a ``merged()`` result in place (the delta it folded in is gone)."""
        self.keys, self.slots, self.owner, self.slot_of, self.dead = merged
        self.added, self.removed, self.delta = {}, {}, 0

    def _pairs(self, table, skip_dead=False):
        pairs = [(key, slot) for key, held in table.items() for slot in _slots(held)
                 if not (skip_dead and self.dead[slot])]
        return (np.fromiter((key for key, _ in pairs), np.int64, len(pairs)),
                np.fromiter((slot for _, slot in pairs), np.int64, len(pairs)))

    def _find(self, find_keys, find_slots):
        """(insertion point, whether held) of each (key, slot) in the columns: a key's pairs are sorted by slot,
        so the point is its first pair plus how many of its pairs have a smaller slot."""
        low, counts = self._ranges(find_keys)
        total = int(counts.sum())
        at = np.repeat(low - np.cumsum(counts) + counts, counts) + np.arange(total)
        which = np.repeat(np.arange(len(find_keys)), counts)
        held = self.slots[at].astype(np.int64)
        wanted = find_slots[which]
        smaller = np.bincount(which, weights=held < wanted, minlength=len(find_keys)).astype(np.int64)
        found = np.bincount(which, weights=held == wanted, minlength=len(find_keys)) > 0
        return low + smaller, found

    def _in_base(self, key, slot):
        low, count = self._ranges(key)
        return slot in self.slots[low:low + count]

    def _ranges(self, query):
        """(first pair, how many pairs) of each key of ``query`` in the columns."""
        low = np.searchsorted(self.keys, query, "left")
        return low, np.searchsorted(self.keys, query, "right") - low

    def _held_run(self, query):
        """(length, first pair, pairs) for the leading keys of ``query`` that someone holds: nobody holds a run
        past the first key nobody holds, so the columns are searched in growing chunks (``FIRST_CHUNK``, then
        four times the last) up to that key. A prompt cached for a few blocks costs the search of a few, not
        of all its keys (each key's search is ~20 cache misses in millions of pairs). Last, the keys searched
        that the delta adds to."""
        lows, counts, start, size, in_delta, added = [], [], 0, FIRST_CHUNK, set(), self.added
        while start < len(query):
            chunk = query[start:start + size]
            low, count = self._ranges(chunk)
            held = count > 0
            if added:  # each key looked up (``set & dict.keys()`` would copy the delta's keys into a set first)
                found = {key for key in chunk.tolist() if key in added}
                if found:
                    held |= np.isin(chunk, np.fromiter(found, np.int64, len(found)))
                    in_delta |= found
            lows.append(low)
            counts.append(count)
            if not held.all():
                length = start + int(np.argmin(held))
                break
            start, size = start + size, 4 * size
        else:
            length = len(query)
        if not lows:  # an empty query: nothing searched, a run of none (as the C walk answers it)
            return 0, query, query, in_delta
        if len(lows) == 1:
            return length, lows[0][:length], counts[0][:length], in_delta
        return length, np.concatenate(lows)[:length], np.concatenate(counts)[:length], in_delta

    def hits(self, prompt_keys):
        """``{instance_id: blocks}``: the longest leading run of ``prompt_keys`` each instance holds (the best of
        its engines'), for the instances holding at least the first key."""
        if compiled_runs is not None:
            runs = compiled_runs(self.keys, self.slots, self.dead, prompt_keys, self.added, self.removed)
        else:
            runs = self.numpy_runs(prompt_keys)
        answer = {}
        for slot, run in runs.items():
            instance_id = self.owner[slot]
            if instance_id is not None and run > answer.get(instance_id, 0):
                answer[instance_id] = run
        return answer

    def numpy_runs(self, prompt_keys):
        """``{slot: run}`` of ``hits`` in numpy: ``_held_run``'s search, then ``leading_runs`` over the pairs found
        (the base's, less the removed and the dead, with the delta's added)."""
        query = np.asarray(prompt_keys, np.int64)
        length, low, counts, in_delta = self._held_run(query)
        if not length:
            return {}
        total = int(counts.sum())
        starts = np.repeat(low[:length] - np.cumsum(counts) + counts, counts) + np.arange(total)
        slots = self.slots[starts].astype(np.int64)
        positions = np.repeat(np.arange(length), counts)
        keep = ~self.dead[slots]
        if self.removed:
            tombstoned = {key for key in query[:length].tolist() if key in self.removed}
            for position in (p for p in range(length) if int(query[p]) in tombstoned):
                for slot in _slots(self.removed[int(query[position])]):
                    keep &= ~((positions == position) & (slots == slot))
        slots, positions = slots[keep], positions[keep]
        if in_delta:
            extra = [(position, slot) for position in range(length)
                     for slot in _slots(self.added.get(int(query[position]))) if not self.dead[slot]]
            if extra:
                positions = np.r_[positions, [position for position, _ in extra]]
                slots = np.r_[slots, [slot for _, slot in extra]]
        return leading_runs(positions, slots, length, ordered=not in_delta)


class LearnedIndex:
    """Keys placed on instances until a deadline (learned mode): ``{key: {instance_id: expires_at}}``."""

    MAX_KEYS = 1_000_000  # beyond this, new records wait for the next sweep of the expired ones

    def __init__(self):
        self.table = {}

    def __len__(self):
        return len(self.table)

    def record(self, instance_id, keys, expires_at):
        if len(self.table) + len(keys) > self.MAX_KEYS:
            return
        for key in keys:
            holders = self.table.setdefault(int(key), {})
            holders[instance_id] = max(expires_at, holders.get(instance_id, expires_at))

    def sweep(self, now):
        for key in [key for key, holders in self.table.items() if all(at <= now for at in holders.values())]:
            del self.table[key]

    def drop(self, instance_id):
        for holders in self.table.values():
            holders.pop(instance_id, None)

    def hits(self, prompt_keys, now):
        answer, current = {}, None
        for position, key in enumerate(prompt_keys):
            holders = {i for i, at in self.table.get(int(key), {}).items() if at > now}
            current = holders if current is None else current & holders
            if not current:
                break
            for instance_id in current:
                answer[instance_id] = position + 1
        return answer

"""Entries kept as numpy columns, one slot per entry: what every board of the project stands on.

Placement's candidates (``proxy_app.placement.decision.CandidateBoard``),
the Scheduler's pools (``scheduler_app.placement.PoolBoard``) and the pool
summary's figures (``proxy_app.pool.columns.PoolColumns``) each hold one
``SlotColumns``: a key finds its slot, a removed entry's slot is reused, and
every column doubles together when the slots run out. A board names its
columns (``Column``: dtype, the value of an empty slot, and rows for a
two-dimensional one) and reads them as ``columns.name``; what a column
means is the board's.
"""

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Column:
    dtype: object
    empty: object = 0  # the value of a slot no entry holds
    rows: int | None = None  # a two-dimensional column: ``rows`` values per slot


class SlotColumns:
    """Slots by key over named numpy columns; ``size`` slots have ever been used (the columns' live prefix)."""

    def __init__(self, columns, capacity=64):
        self._specs = dict(columns)
        self.slot_of = {}
        self._free = []
        self.size = 0
        self.capacity = 0
        self._allocate(max(1, capacity))

    def _allocate(self, capacity):
        for name, spec in self._specs.items():
            shape = (capacity,) if spec.rows is None else (spec.rows, capacity)
            column = np.full(shape, spec.empty, dtype=spec.dtype)
            if self.capacity:
                column[..., :self.capacity] = getattr(self, name)
            setattr(self, name, column)
        self.capacity = capacity

    def __len__(self):
        return len(self.slot_of)

    def __contains__(self, key):
        return key in self.slot_of

    def keys(self):
        return list(self.slot_of)

    def slot(self, key):
        """``(slot, new)``: the slot of ``key``, taken (and the columns grown) when it had none."""
        slot = self.slot_of.get(key)
        if slot is not None:
            return slot, False
        if self._free:
            slot = self._free.pop()
        else:
            slot = self.size
            self.size += 1
            if self.size > self.capacity:
                self._allocate(2 * self.capacity)
        self.slot_of[key] = slot
        return slot, True

    def remove(self, key):
        """Empty the slot of ``key`` (every column back to its empty value) for reuse; the slot, or None."""
        slot = self.slot_of.pop(key, None)
        if slot is not None:
            for name, spec in self._specs.items():
                getattr(self, name)[..., slot] = spec.empty
            self._free.append(slot)
        return slot

    def live(self, name):
        """Column ``name`` over the slots ever used (``size``): what a vector operation runs over."""
        return getattr(self, name)[..., :self.size]

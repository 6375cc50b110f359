"""What a candidate board derives from each instance's reported columns (SPEC 14.1 steps 2 and 3): its signal tier's
pressure with and without the requests placed since its report, whether the queue sets it, and its ranking key but
for the signal's age. Pure, numpy only; ``CandidateBoard`` calls these for the slots that changed.

Two forms of one arithmetic: ``derive`` over numpy's vectors, for many slots (a policy's new scales: the whole
board), and ``derive_slot`` in plain floats, for the one or two slots a report or a placement changed between two
decisions, where a dozen numpy calls on tiny arrays cost more than the whole of it.
``tests/proxy/test_placement_board_columns.py`` holds the two to one answer, bit for bit.
"""

import math

import numpy as np

from proxy_app.ingest.engines import engine_pressure
from proxy_app.placement.ranking_key import MAX_PRESSURE_MICROS, pack, pressure_micros

ENGINE_TIER, GPU_TIER, NO_SIGNAL_TIER = 0, 1, 2
# Up to this many slots due, a board derives them one by one in plain floats rather than as vectors.
FEW_SLOTS = 8


def derive(c, slots, policy):
    """Columns ``pressure``, ``reported_pressure``, ``from_queue`` and ``rank`` of ``slots`` in ``c`` (a board's
    ``SlotColumns``) for ``policy``'s scales. The pressure is NaN where the tier has no signal; ``pressure`` counts
    ``pending`` (it orders the ranking), ``reported_pressure`` does not (the verdict and affinity read it). Both in
    one pass over the slots twice: a few numpy calls, not twice as many."""
    size = len(slots)
    twice = np.concatenate([slots, slots])
    pending = np.concatenate([c.pending[slots], np.zeros(size, dtype=np.int64)])
    waiting = c.waiting[twice] + pending
    engine = engine_pressure(waiting, c.kv[twice], policy.waiting_scale, policy.kv_scale)
    gpu = c.gpu_util[twice] / 100.0 + pending / policy.waiting_scale
    tier = c.tier[twice]
    pressure = np.round(np.where(tier == ENGINE_TIER, engine, np.where(tier == GPU_TIER, gpu, np.nan)), 6)
    c.pressure[slots], c.reported_pressure[slots] = pressure[:size], pressure[size:]
    c.from_queue[slots] = waiting[:size] / policy.waiting_scale >= c.kv[slots] / policy.kv_scale
    c.rank[slots] = pack(c.tier[slots], pressure_micros(c.pressure[slots]), c.running[slots])


def derive_slot(c, slot, policy):
    """``derive`` of one slot, operation for operation in Python floats (numpy's ``round(x, 6)`` is ``rint`` of
    ``x × 10⁶``, then ÷ 10⁶; ``rint`` and Python's ``round`` both round half to even)."""
    tier, pending = int(c.tier[slot]), int(c.pending[slot])
    waiting, kv, gpu_util = float(c.waiting[slot]), float(c.kv[slot]), float(c.gpu_util[slot])
    queued = waiting + pending
    if tier == ENGINE_TIER:
        pressure = _round6(max(_zero_if_nan(queued) / policy.waiting_scale, _zero_if_nan(kv) / policy.kv_scale))
        reported = _round6(max(_zero_if_nan(waiting + 0) / policy.waiting_scale, _zero_if_nan(kv) / policy.kv_scale))
    elif tier == GPU_TIER:
        pressure = _round6(gpu_util / 100.0 + pending / policy.waiting_scale)
        reported = _round6(gpu_util / 100.0 + 0 / policy.waiting_scale)
    else:
        pressure = reported = math.nan
    c.pressure[slot], c.reported_pressure[slot] = pressure, reported
    c.from_queue[slot] = queued / policy.waiting_scale >= kv / policy.kv_scale
    micros = 0 if math.isnan(pressure) else min(max(round(pressure * 1e6), 0), MAX_PRESSURE_MICROS)
    c.rank[slot] = pack(tier, micros, int(c.running[slot]))


def _zero_if_nan(value):
    return 0.0 if math.isnan(value) else value


def _round6(value):
    scaled = value * 1e6
    return round(scaled) / 1e6 if math.isfinite(scaled) else value

"""Placement's ranking key (SPEC 14.1 step 3, 15.5): its fields packed into one int64, smaller ranking first.

Most significant first: the signal tier, the pressure in millionths (with a prompt, ``prefix_cost``'s cost in
its place), the running requests, the signal's age in hundredths of a second; each field capped to its bits.
Ties beyond the key go by the instance id's hash, then the id (``CandidateBoard._best``). Pure, numpy only.
"""

import numpy as np

from proxy_app.placement.prefix_cost import cost_micros

PRESSURE_BITS, RUNNING_BITS, AGE_BITS = 35, 10, 16
MAX_PRESSURE_MICROS = (1 << PRESSURE_BITS) - 1
MAX_RUNNING = (1 << RUNNING_BITS) - 1
MAX_AGE_CENTIS = (1 << AGE_BITS) - 1
PRESSURE_SHIFT = RUNNING_BITS + AGE_BITS


def pack(tier, micros, running, age=0):
    """The fields (``micros`` already capped; ``running`` is capped here) as one int64."""
    return (tier << (PRESSURE_BITS + PRESSURE_SHIFT)) | (micros << PRESSURE_SHIFT) \
        | (np.minimum(np.maximum(running, 0), MAX_RUNNING) << AGE_BITS) | age


def pressure_micros(pressure):
    """A pressure in capped millionths; fmax and fmin pass over NaN: no pressure is 0 micros (nan_to_num and clip
    cost ~10 µs a call each, numpy's Python around a few ufuncs)."""
    return np.fmin(np.fmax(np.rint(pressure * 1e6), 0.0), MAX_PRESSURE_MICROS).astype(np.int64)


def age_centis(now, reported):
    """The signal's age field; no report (NaN) is the largest age."""
    with np.errstate(invalid="ignore"):
        age = np.floor((now - reported) * 100.0)
    return np.fmax(np.fmin(age, MAX_AGE_CENTIS), 0.0).astype(np.int64)


def with_prefix_cost(keys, pressure, hit_blocks, prompt_blocks):
    """``keys`` with the pressure field holding ``prefix_cost``'s cost of a prompt of ``prompt_blocks`` of which
    ``hit_blocks`` are cached (per key), capped like the pressure."""
    micros = (keys >> PRESSURE_SHIFT) & MAX_PRESSURE_MICROS
    cost = np.clip(cost_micros(micros, pressure, hit_blocks, prompt_blocks), 0, MAX_PRESSURE_MICROS)
    return keys + ((cost - micros) << PRESSURE_SHIFT)

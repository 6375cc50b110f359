"""How much a cached prompt prefix is worth against load (SPEC 15.5): the ranking cost. Pure, numpy only.

A request's time to first token is about its wait for a slot plus the prefill
of the prompt blocks the engine does not hold. Placement already measures the
first as ``pressure`` (SPEC 14.1); the second, as a share of the prompt, is
the uncached fraction ``(prompt_blocks - hit_blocks) / prompt_blocks``. The
cost of an instance is, in millionths:

    cost = pressure + PREFIX_WEIGHT × uncached_fraction  (+ PREFIX_WEIGHT when pressure ≥ 1)

``PREFIX_WEIGHT`` = 1: a prompt with nothing cached costs as much as one
full unit of pressure (a queue of W waiting requests, or K of the KV cache),
so a whole cached prefix is worth moving to an instance up to one unit
busier, and half of one up to half a unit. Lowest cost first, then 14.1's
tie-breaks (running requests, signal age, the id's hash, the id). The rules:

(a) at equal pressure the uncached term alone differs: more cached first;
(b) at equal cached prefix the uncached term is equal: the order is the pressure's, then 14.1's ties;
(c) with no hit on any eligible instance every uncached term is PREFIX_WEIGHT: the order is 14.1's
    (placement then uses 14.1's key as it is);
(d) a saturated instance (pressure ≥ 1) pays PREFIX_WEIGHT more: its cost is at least 1 + PREFIX_WEIGHT,
    above every unsaturated one's (below 1 + PREFIX_WEIGHT), so no cached prefix lifts it over them.

The signal tier (engine, then GPU only, then none) still comes first.
"""

import numpy as np

PREFIX_WEIGHT = 1.0
WEIGHT_MICROS = int(round(PREFIX_WEIGHT * 1e6))


def cost_micros(pressure_micros, pressure, hit_blocks, prompt_blocks):
    """The cost above, in integer millionths, of instances with these pressures (``pressure_micros``: 14.1's
    rounded pressure key; ``pressure``: the pressure itself, NaN without a signal) and cached blocks."""
    if prompt_blocks <= 0:
        return pressure_micros + WEIGHT_MICROS
    uncached = np.rint((prompt_blocks - np.minimum(hit_blocks, prompt_blocks)) * (WEIGHT_MICROS / prompt_blocks))
    saturated = pressure >= 1  # NaN (no pressure known) is not
    return pressure_micros + uncached.astype(np.int64) + saturated.astype(np.int64) * WEIGHT_MICROS

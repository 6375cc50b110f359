"""When each simulated instance reports: evenly spread slots, a ramped start, a late round's skip.

Instance ``i`` of ``N`` reports at ``t0 + i/N × interval`` plus whole
intervals, so the load is spread evenly over the interval whichever process
runs the instance; a large fleet starts over a ramp (an even share registers
each interval); a round that outlasts its next slots skips them rather than
bursting to catch up, as the agent does.
"""

import math

# asyncio may run a timer a hair before its time; a slot this close is due.
DUE_SLACK_S = 0.001


def slot_offset_ms(index, instances, interval_ms):
    """Where in the interval host ``index`` of ``instances`` reports: evenly spread, no herd."""
    return interval_ms * index / instances


def ramp_rounds(ramp_s, interval_ms):
    """Over how many intervals the fleet starts (at least one)."""
    return max(1, math.ceil(ramp_s * 1000.0 / interval_ms))


def first_slot_ms(index, instances, interval_ms, rounds_of_ramp=1):
    """When host ``index`` first reports (and so registers), from the run's start.

    Every ``rounds_of_ramp``-th host starts in the same interval, so each
    interval of the ramp registers an even share of the fleet, itself spread
    evenly over the interval; a Proxy is not hit by the whole fleet's
    registrations in its first second.
    """
    return slot_offset_ms(index, instances, interval_ms) + (index % rounds_of_ramp) * interval_ms


def first_slot(slot_at, interval_s, not_before):
    """The first of the fixed-rate slots ``slot_at + k × interval_s`` not before ``not_before``, and k.

    ``k`` slots are skipped: a late round or a backoff skips slots rather than
    bursting to catch up, as the agent does.
    """
    if slot_at + DUE_SLACK_S >= not_before:
        return slot_at, 0
    skipped = math.ceil((not_before - DUE_SLACK_S - slot_at) / interval_s)
    return slot_at + skipped * interval_s, skipped

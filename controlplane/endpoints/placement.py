"""What a placement decision is on both roles (SPEC 14.1, 14.3): its verdicts and its shape. Pure."""

import dataclasses
import enum
import hashlib

import numpy as np


class Verdict(enum.Enum):
    ACCEPT = "accept"
    QUEUE = "queue"
    SHED = "shed"
    UNAVAILABLE = "unavailable"

    @property
    def http_status(self):
        return {"accept": 200, "queue": 200, "shed": 429, "unavailable": 503}[self.value]


@dataclasses.dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str
    considered: int
    eligible: int
    excluded: dict
    ranked: list  # the best ``request.count`` eligible candidates, best first
    # With a prompt (the Proxy's SPEC 15.5): its full blocks, and where its cached prefix was read from.
    prompt_blocks: int | None = None
    prefix_source: str | None = None

    @property
    def answered(self):
        """The candidates an answer carries: none when shedding or unavailable."""
        return [] if self.verdict in (Verdict.SHED, Verdict.UNAVAILABLE) else self.ranked


class Rule(enum.Enum):
    """Why an entry was not eligible: the names of ``excluded`` (SPEC 14.1, 14.3). The Proxy checks
    excluded, stale, fenced, rejecting, gpu_error, model, adapter, signal_stale in that order; the Scheduler
    excluded, stale, rejecting, model."""

    EXCLUDED = "excluded"
    STALE = "stale"
    FENCED = "fenced"
    REJECTING = "rejecting"
    GPU_ERROR = "gpu_error"
    MODEL = "model"
    ADAPTER = "adapter"
    SIGNAL_STALE = "signal_stale"


REASONS = {Verdict.ACCEPT: "lowest_pressure", Verdict.QUEUE: "all_saturated",
           Verdict.SHED: "all_over_shed_pressure", Verdict.UNAVAILABLE: "no_eligible_instance"}


def stable_hash(text):
    """A 64-bit hash that is the same in every process (Python's ``hash`` of a str is not)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


class Sieve:
    """Eligibility as a mask over a board's slots: each ``drop`` takes out what fails one rule and counts it
    under that rule, so an entry is counted under the first rule it fails (a request's ``exclude`` first)."""

    def __init__(self, present, slot_of, exclude):
        self.remaining = present.copy()
        self._excluded = {}
        if exclude:
            asked = np.zeros(len(present), dtype=bool)
            asked[[slot_of[key] for key in exclude if key in slot_of]] = True
            self.drop(Rule.EXCLUDED.value, asked)

    def drop(self, rule, failing):
        # Whole-mask operations only: a masked assignment (``remaining[failed] = False``) costs ten times an ``&``
        # over 10,000 slots, and most rules take nothing out.
        failed = self.remaining & failing
        if failed.any():
            self._excluded[rule] = int(np.count_nonzero(failed))
            self.remaining &= ~failed

    def excluded(self):
        """``{rule: count}`` of what was taken out, by rule name."""
        return dict(sorted(self._excluded.items()))


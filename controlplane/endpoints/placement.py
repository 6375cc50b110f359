"""What a placement decision is on both roles (SPEC 14.1, 14.3): its verdicts and its shape. Pure."""

import dataclasses
import enum
import hashlib


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

    @property
    def answered(self):
        """The candidates an answer carries: none when shedding or unavailable."""
        return [] if self.verdict in (Verdict.SHED, Verdict.UNAVAILABLE) else self.ranked


REASONS = {Verdict.ACCEPT: "lowest_pressure", Verdict.QUEUE: "all_saturated",
           Verdict.SHED: "all_over_shed_pressure", Verdict.UNAVAILABLE: "no_eligible_instance"}


def stable_hash(text):
    """A 64-bit hash that is the same in every process (Python's ``hash`` of a str is not)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")

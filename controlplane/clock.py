"""The one source of "now" for the control planes, and how a moment reads to people.

Everything that needs the current time calls ``clock.now()`` so tests can
freeze it (``time_machine``) or pass an explicit ``now`` to pure functions.
``ago`` and ``date_and_age`` write an epoch-seconds moment for the admin and
the dashboards alike: "12 s ago", "2026-01-01 00:00:00 UTC (12 s ago)".
"""

import time
from datetime import datetime, timezone

from controlplane.figures import MISSING, in_units

# An age in the unit that keeps it short: seconds for two minutes, minutes for two hours, hours for two days.
AGE_UNITS = ((120, 1, "s", 0), (7200, 60, "min", 0), (172800, 3600, "h", 1), (None, 86400, "d", 0))


def now():
    """Current time as float epoch seconds (the control planes' unit)."""
    return time.time()


def age_s(now, at):
    """Seconds from ``at`` to ``now``, never below 0 (a stamp taken a moment after ``now`` was read is fresh,
    not from the future); None without a stamp."""
    return None if at is None else max(0.0, now - at)


def ago(timestamp, at=None):
    """'12 s ago' for an epoch-seconds timestamp, seen at ``at`` (default now); '–' when unknown."""
    if timestamp is None:
        return MISSING
    age = max(0.0, (now() if at is None else at) - timestamp)
    return f"{in_units(age, AGE_UNITS)} ago"


def date_and_age(timestamp, at=None):
    """'2026-01-01 00:00:00 UTC (12 s ago)'; '–' when unknown."""
    if timestamp is None:
        return MISSING
    moment = datetime.fromtimestamp(timestamp, tz=timezone.utc)
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC ({ago(timestamp, at)})"

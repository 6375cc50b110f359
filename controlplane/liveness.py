"""Liveness as pure functions of stored timestamps and one ``now`` (SPEC 4).

Both control planes use these; nothing else decides whether an entry is
alive. Steps:

1. ``age = now - last_seen_at`` (server receive times only).
2. ``is_alive`` is ``age <= ttl_s``.
3. ``status`` is ``alive`` while ``age`` is within one heartbeat interval plus
   jitter slack (half an interval), ``suspect`` once a beat was missed but the
   TTL has not passed, ``stale`` past the TTL.
"""

from django.db import models

# Share of a heartbeat interval a beat may be late before it counts as missed.
JITTER_SLACK = 0.5


class Status(models.TextChoices):
    ALIVE = "alive", "alive"
    SUSPECT = "suspect", "suspect"
    STALE = "stale", "stale"


# The last status-change record of an entry that was unregistered.
UNREGISTERED = "unregistered"


def heartbeat_interval_for_ttl(ttl_s):
    """The interval the proxy hands to instances: min(10, max(1, ttl // 3))."""
    return min(10, max(1, int(ttl_s) // 3))


def alive_window(ttl_s, heartbeat_interval_s):
    """Age up to which an entry is ``alive`` rather than ``suspect``."""
    return min(float(ttl_s), heartbeat_interval_s * (1 + JITTER_SLACK))


def is_alive(last_seen_at, now, ttl_s):
    if last_seen_at is None:
        return False
    return now - last_seen_at <= ttl_s


def status_at(last_seen_at, now, ttl_s, heartbeat_interval_s):
    """The status an entry last seen at ``last_seen_at`` has at ``now``."""
    if not is_alive(last_seen_at, now, ttl_s):
        return Status.STALE
    if now - last_seen_at <= alive_window(ttl_s, heartbeat_interval_s):
        return Status.ALIVE
    return Status.SUSPECT

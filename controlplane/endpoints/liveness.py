"""Liveness as pure functions of stored timestamps and one ``now`` (SPEC 4).

Both control planes use these; nothing else decides whether an entry is
alive, in Python or in a query. Steps:

1. ``age = now - last_seen_at`` (server receive times only).
2. ``is_alive`` is ``age <= ttl_s``; as a query, ``last_seen_at >= now - ttl_s``
   (``alive_q`` for the ORM, ``alive_sql`` for the raw-SQL hot path,
   ``alive_mask`` for the boards' numpy columns;
   ``status_q`` filters on a whole status, ``past_alive_window_q`` on the
   entries no longer alive, suspect or stale).
3. ``status`` is ``alive`` while ``age`` is within one heartbeat interval plus
   jitter slack (half an interval), ``suspect`` once a beat was missed but the
   TTL has not passed, ``stale`` past the TTL.
4. A status began at a moment fixed by the last contact alone
   (``status_began_at``): a change is stamped with that moment, not with the
   time a sweeper happened to notice it.
"""

from django.db import models
from django.db.models import Q

# Share of a heartbeat interval a beat may be late before it counts as missed.
JITTER_SLACK = 0.5


class Status(models.TextChoices):
    """What an entry's last contact says about it now."""

    ALIVE = "alive", "alive"
    SUSPECT = "suspect", "suspect"
    STALE = "stale", "stale"


class ChangeStatus(models.TextChoices):
    """The two ends of a recorded status change: a status, or the entry's end."""

    NONE = "", "–"  # before the first registration
    ALIVE = Status.ALIVE.value, "alive"
    SUSPECT = Status.SUSPECT.value, "suspect"
    STALE = Status.STALE.value, "stale"
    EXPIRED = "expired", "expired"  # deleted after the retention
    UNREGISTERED = "unregistered", "unregistered"  # deleted on request
    FENCED = "fenced", "fenced"  # kept out of placement (SPEC 14.2); the reason says why
    UNFENCED = "unfenced", "unfenced"  # let back into placement


class ChangeReason(models.TextChoices):
    """Why a status change happened."""

    REGISTERED = "registered", "registered"
    RE_REGISTERED = "re-registered", "re-registered"
    HEARTBEAT = "heartbeat", "heartbeat"
    SNAPSHOT = "snapshot", "snapshot"
    MISSED_HEARTBEATS = "missed heartbeats", "missed heartbeats"
    RETENTION_PASSED = "retention passed", "retention passed"
    UNREGISTERED = "unregistered", "unregistered"


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


def status_reader(now, ttl_s, heartbeat_interval_s):
    """``read(last_seen_at)`` → ``(status_at(…).value, is_alive(…))`` for many entries at one ``now``
    (a list of 10,000): the same arithmetic, the alive window worked out once."""
    window = alive_window(ttl_s, heartbeat_interval_s)
    alive, suspect, stale = (Status.ALIVE.value, True), (Status.SUSPECT.value, True), (Status.STALE.value, False)

    def read(last_seen_at):
        if last_seen_at is None:
            return stale
        age = now - last_seen_at
        if age > ttl_s:
            return stale
        return alive if age <= window else suspect

    return read


def status_began_at(status, last_seen_at, ttl_s, heartbeat_interval_s):
    """The moment an entry last seen at ``last_seen_at`` entered ``status``.

    ``alive`` at the contact itself, ``suspect`` when the alive window ran
    out, ``stale`` when the TTL did (healthchecks' ``going_down_after``).
    """
    if status == Status.ALIVE:
        return last_seen_at
    if status == Status.SUSPECT:
        return last_seen_at + alive_window(ttl_s, heartbeat_interval_s)
    return last_seen_at + ttl_s


def alive_since(now, ttl_s):
    """The oldest ``last_seen_at`` that is still alive at ``now``."""
    return now - ttl_s


def alive_mask(last_seen_at, now, ttl_s):
    """``is_alive`` over a numpy column of ``last_seen_at`` (NaN or -inf: never seen): the boards' twin of
    ``alive_q``, the same comparison (``tests/controlplane/test_liveness.py`` holds the three to one answer)."""
    return last_seen_at >= alive_since(now, ttl_s)


def alive_q(now, ttl_s, prefix=""):
    """``is_alive`` as an ORM filter; ``prefix`` reaches it through a relation (``"instance__"``)."""
    return Q(**{f"{prefix}last_seen_at__gte": alive_since(now, ttl_s)})


def alive_sql(column):
    """``is_alive`` as a SQL condition on the quoted ``column``; its one parameter is ``alive_since(now, ttl_s)``."""
    return f"{column} >= %s"


def past_alive_window_q(now, ttl_s, heartbeat_interval_s):
    """The entries whose alive window has run out at ``now``: suspect or stale (``status_at`` past ``alive``)."""
    return Q(last_seen_at__lt=now - alive_window(ttl_s, heartbeat_interval_s))


def status_q(status, now, ttl_s, heartbeat_interval_s):
    """The entries whose status at ``now`` is ``status`` (``status_at`` as a filter)."""
    if status == Status.ALIVE:
        return Q(last_seen_at__gte=now - alive_window(ttl_s, heartbeat_interval_s))
    if status == Status.SUSPECT:
        return past_alive_window_q(now, ttl_s, heartbeat_interval_s) & alive_q(now, ttl_s)
    return ~alive_q(now, ttl_s)

"""Liveness operations shared by every entry that heartbeats (instances, proxies).

The model of a manager built on ``LivenessManager`` inherits
``controlplane.models.LivenessFields`` and provides
``record_change(pk, old_status, new_status, reason, at)``. Every write here is
claimed with a conditional UPDATE or DELETE, so two processes doing the same
work at once (two sweepers, a sweep racing a heartbeat) never record a change
twice.
"""

from django.db import IntegrityError, models, transaction
from django.db.models import Q

from controlplane import liveness
from controlplane.liveness import Status

# The last status-change record of an entry deleted after the retention.
EXPIRED = "expired"


class LivenessManager(models.Manager):
    def create_or_refresh(self, pk, now, create_fields, refresh):
        """Register an entry: create it alive, or refresh a known one and revive it.

        ``refresh(entry)`` applies the re-register rules to a known entry.
        A concurrent first register of the same id lands in the refresh path.
        Returns the entry.
        """
        try:
            with transaction.atomic():
                entry = self.create(
                    **{self.model._meta.pk.name: pk}, registered_at=now, last_seen_at=now, status=Status.ALIVE,
                    **create_fields,
                )
                self.model.record_change(pk, "", Status.ALIVE, "registered", now)
                return entry
        except IntegrityError:
            pass
        with transaction.atomic():
            entry = self.select_for_update().get(pk=pk)
            old_status = entry.status
            refresh(entry)
            entry.last_seen_at = now
            entry.status = Status.ALIVE
            entry.save()
            if old_status != Status.ALIVE:
                self.model.record_change(pk, old_status, Status.ALIVE, "re-registered", now)
            return entry

    def touch(self, pk, now, reason, **fields):
        """Refresh ``last_seen_at`` (and the given fields); False if unknown.

        The common case is one UPDATE on an entry stored as alive and seen
        within its TTL. Otherwise the entry is revived with its status changes
        recorded, including a stale spell the sweeper never got to see.
        """
        ttl_s = self.model.ttl_s()
        if self.filter(pk=pk, status=Status.ALIVE, last_seen_at__gte=now - ttl_s).update(last_seen_at=now, **fields):
            return True
        row = self.filter(pk=pk).values_list("status", "last_seen_at").first()
        if row is None:
            return False
        old_status, seen = row
        with transaction.atomic():
            if self.filter(pk=pk, status=old_status, last_seen_at=seen).update(
                last_seen_at=now, status=Status.ALIVE, **fields
            ):
                if old_status != Status.STALE and seen < now - ttl_s:
                    self.model.record_change(pk, old_status, Status.STALE, "missed heartbeats", seen + ttl_s)
                    old_status = Status.STALE
                if old_status != Status.ALIVE:
                    self.model.record_change(pk, old_status, Status.ALIVE, reason, now)
                return True
        # Another request refreshed it meanwhile (and recorded any change).
        return bool(self.filter(pk=pk).update(last_seen_at=now, status=Status.ALIVE, **fields))

    def unregister(self, pk, now):
        """Delete an entry, recording a last change to ``unregistered``; False if unknown."""
        with transaction.atomic():
            old_status = self.filter(pk=pk).values_list("status", flat=True).first()
            if old_status is None or not self.filter(pk=pk).delete()[0]:
                return False
            self.model.record_change(pk, old_status, liveness.UNREGISTERED, "unregistered", now)
        return True

    def sweep(self, now, ttl_s, heartbeat_interval_s, batch=1000):
        """Move stored statuses alive → suspect → stale; record each change.

        Each row is claimed with a conditional UPDATE on its old status and
        last_seen_at, so two sweepers at once never record a change twice and
        a heartbeat that lands in between is never overwritten. At most
        ``batch`` rows per call; returns how many changed.
        """
        alive_cut = now - liveness.alive_window(ttl_s, heartbeat_interval_s)
        stale_cut = now - ttl_s
        due = self.filter(
            Q(status=Status.ALIVE, last_seen_at__lt=alive_cut)
            | Q(status=Status.SUSPECT, last_seen_at__lt=stale_cut)
        ).values_list("pk", "status", "last_seen_at")[:batch]
        changed = 0
        for pk, old_status, seen in list(due):
            new_status = liveness.status_at(seen, now, ttl_s, heartbeat_interval_s)
            if new_status == old_status:
                continue
            with transaction.atomic():
                if self.filter(pk=pk, status=old_status, last_seen_at=seen).update(status=new_status):
                    self.model.record_change(pk, old_status, new_status, "missed heartbeats", now)
                    changed += 1
        return changed

    def delete_expired(self, now, retention_s):
        """Delete entries not seen for ``retention_s``; returns how many."""
        cut = now - retention_s
        deleted = 0
        for pk, old_status in list(self.filter(last_seen_at__lt=cut).values_list("pk", "status")):
            with transaction.atomic():
                if self.filter(pk=pk, last_seen_at__lt=cut).delete()[0]:
                    self.model.record_change(pk, old_status, EXPIRED, "retention passed", now)
                    deleted += 1
        return deleted


class HistoryManager(models.Manager):
    """Rows that only age out; ``time_field`` holds their epoch seconds."""

    time_field = "at"

    def prune(self, now, keep_s):
        """Delete rows older than ``keep_s``; returns how many.

        One DELETE on an indexed column (no signals or cascades hang off
        these models, so Django issues it without loading rows); running it
        twice at once only deletes nothing the second time.
        """
        return self.filter(**{f"{self.time_field}__lt": now - keep_s}).delete()[0]

"""Liveness operations shared by every entry that heartbeats (instances, proxies).

The model of a ``LivenessManager`` is a ``controlplane.endpoints.models.RegisteredEndpoint``.
Every write here is claimed with a conditional UPDATE or DELETE, so two
processes doing the same work at once (two sweepers, a sweep racing a
heartbeat) never record a change twice.
"""

import functools

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, models, transaction
from django.db.models import Q

from controlplane.endpoints import liveness
from controlplane.endpoints.liveness import ChangeReason, ChangeStatus, Status

# The statuses a silent entry passes through, in order.
MISSED_ORDER = (Status.ALIVE, Status.SUSPECT, Status.STALE)


@functools.lru_cache(maxsize=64)
def touch_alive_sql(table, pk_column, set_columns=(), match_columns=()):
    """The contact UPDATE of an entry stored as alive and seen within its TTL (and whose
    ``match_columns`` hold the values given).

    Sets ``last_seen_at`` and ``set_columns``; the one statement behind every
    heartbeat and snapshot, here and inside the PostgreSQL ingest statement.
    Parameters: ``touch_alive_params``.
    """
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(column)} = %s" for column in ("last_seen_at", *set_columns))
    matches = "".join(f" AND {quote(column)} = %s" for column in match_columns)
    return (
        f"UPDATE {quote(table)} SET {assignments} "
        f"WHERE {quote(pk_column)} = %s AND {quote('status')} = %s AND {liveness.alive_sql(quote('last_seen_at'))}"
        f"{matches}"
    )


@functools.lru_cache(maxsize=16)
def unregister_sql(model, vendor):
    """The statements of an unregister: delete the entry, answering its status, then each row that cascades from it.

    The entry goes first, so its row is locked before anything that refers to
    it is gathered (the foreign keys are checked at commit); the rows that
    cascade are deleted by their key, one statement each, none loaded. Only
    a direct CASCADE is supported (none of them is referred to in turn).
    """
    quote, opts = connection.ops.quote_name, model._meta
    entry = f"DELETE FROM {quote(opts.db_table)} WHERE {quote(opts.pk.column)} = %s RETURNING {quote('status')}"
    dependents = []
    for relation in opts.related_objects:
        related = relation.related_model._meta
        if relation.on_delete is not models.CASCADE or related.related_objects:
            raise ImproperlyConfigured(f"unregister deletes {related.label} rows by key: it needs a direct CASCADE")
        dependents.append(f"DELETE FROM {quote(related.db_table)} WHERE {quote(relation.field.column)} = %s")
    return entry, tuple(dependents)


def touch_alive_params(model, pk, now, fields, match=None):
    """Parameters of ``touch_alive_sql`` for ``fields`` and ``match`` (name → value, in the statement's order)."""
    values = [model._meta.get_field(name).get_db_prep_save(value, connection) for name, value in fields.items()]
    params = [now, *values, pk, Status.ALIVE.value, liveness.alive_since(now, model.ttl_s())]
    if match:
        params.extend(model._meta.get_field(name).get_db_prep_value(value, connection) for name, value in match.items())
    return params


class LivenessQuerySet(models.QuerySet):
    def alive(self, now):
        """Entries alive at ``now`` (SPEC 4)."""
        return self.filter(liveness.alive_q(now, self.model.ttl_s()))

    def in_view(self, include_dead, now):
        """What a list shows: every entry with ``include_dead``, else the alive ones."""
        return self if include_dead else self.alive(now)


class LivenessManager(models.Manager.from_queryset(LivenessQuerySet)):
    def create_or_refresh(self, pk, now, create_fields, refresh):
        """Register an entry: create it alive, or refresh a known one and revive it.

        ``refresh(entry)`` applies the re-register rules to a known entry.
        A concurrent first register of the same id lands in the refresh path;
        an entry unregistered between the two (PostgreSQL lets that happen)
        is created again. Returns the entry.
        """
        while True:
            try:
                with transaction.atomic():
                    entry = self.create(
                        **{self.model._meta.pk.name: pk}, registered_at=now, last_seen_at=now, status=Status.ALIVE,
                        **create_fields,
                    )
                    self.model.record_change(pk, ChangeStatus.NONE, Status.ALIVE, ChangeReason.REGISTERED, now)
                    return entry
            except IntegrityError:
                pass
            with transaction.atomic():
                entry = self.select_for_update().filter(pk=pk).first()
                if entry is None:
                    continue  # unregistered since the create failed: create it
                old_status = entry.status
                if not liveness.is_alive(entry.last_seen_at, now, self.model.ttl_s()):  # a silence no sweep saw
                    old_status = self.record_missed(pk, old_status, entry.last_seen_at, now)
                refresh(entry)
                entry.last_seen_at = now
                entry.status = Status.ALIVE
                entry.save()
                if old_status != Status.ALIVE:
                    self.model.record_change(pk, old_status, Status.ALIVE, ChangeReason.RE_REGISTERED, now)
                return entry

    def record_missed(self, pk, status, last_seen_at, now):
        """Record each change along alive → suspect → stale that an entry stored as ``status`` has passed
        through by ``now``, each stamped with the moment it began; returns the status it has reached.

        A late sweep, or a contact after a silence no sweep saw, still records
        the suspect spell and then the stale one, as a timely sweep would.
        A status that lasts no time (the TTL inside the alive window) is skipped.
        """
        ttl_s, interval_s = self.model.ttl_s(), self.model.heartbeat_interval_s()
        reached = liveness.status_at(last_seen_at, now, ttl_s, interval_s)
        if status not in MISSED_ORDER or MISSED_ORDER.index(reached) <= MISSED_ORDER.index(status):
            return status
        went_stale = liveness.status_began_at(Status.STALE, last_seen_at, ttl_s, interval_s)
        for step in MISSED_ORDER[MISSED_ORDER.index(status) + 1:MISSED_ORDER.index(reached) + 1]:
            began = liveness.status_began_at(step, last_seen_at, ttl_s, interval_s)
            if step == Status.SUSPECT and began >= went_stale:
                continue
            self.model.record_change(pk, status, step, ChangeReason.MISSED_HEARTBEATS, began)
            status = step
        return status

    def touch(self, pk, now, reason, **fields):
        """Refresh ``last_seen_at`` (and the given fields); False if unknown.

        The common case is one UPDATE on an entry stored as alive and seen
        within its TTL (``touch_alive``); otherwise ``revive``.
        """
        return self.touch_alive(pk, now, fields) or self.revive(pk, now, reason, **fields)

    def touch_alive(self, pk, now, fields=None, match=None):
        """The contact UPDATE alone; False when the entry is unknown, not stored as alive, past its TTL,
        or holds other values than ``match`` (column → value) says.

        On SQLite it goes straight to the driver when nothing watches (``execute_unwatched``): Django's
        cursor cost a fifth of the statement.
        """
        fields = fields or {}
        db = connections[DEFAULT_DB_ALIAS]  # looked up once: each use of the ``connection`` proxy is a lookup
        opts = self.model._meta
        sql = touch_alive_sql(opts.db_table, opts.pk.column, tuple(fields), tuple(match or ()))
        params = touch_alive_params(self.model, pk, now, fields, match)
        if db.vendor == "postgresql":
            with db.cursor() as cursor:
                cursor.execute(sql, params)
                return cursor.rowcount == 1
        return db.execute_unwatched(sql, params) == 1

    def revive(self, pk, now, reason, **fields):
        """Refresh an entry that ``touch_alive`` did not; False if unknown.

        Records its status changes, including a stale spell the sweeper never
        got to see, each stamped with the moment it happened.
        """
        row = self.filter(pk=pk).values_list("status", "last_seen_at").first()
        if row is None:
            return False
        old_status, seen = row
        ttl_s = self.model.ttl_s()
        with transaction.atomic():
            if self.filter(pk=pk, status=old_status, last_seen_at=seen).update(
                last_seen_at=now, status=Status.ALIVE, **fields
            ):
                if not liveness.is_alive(seen, now, ttl_s):  # a silence no sweep saw to its end
                    old_status = self.record_missed(pk, old_status, seen, now)
                if old_status != Status.ALIVE:
                    self.model.record_change(pk, old_status, Status.ALIVE, reason, now)
                return True
        # Another request refreshed it meanwhile (and recorded any change).
        return bool(self.filter(pk=pk).update(last_seen_at=now, status=Status.ALIVE, **fields))

    def unregister(self, pk, now):
        """Delete an entry and the rows that cascade from it, recording a last change to ``unregistered``;
        False if unknown.

        One statement per table (``unregister_sql``), nothing loaded: a fleet
        leaving at once queues a thousand of these on one write lock. The
        entry's row is deleted first: a report being stored for it (which
        updates that row, then writes the rows that refer to it) finishes
        before, or finds the entry gone after. Its series rows have no key
        to it and age out with the pruner.
        """
        entry_sql, dependents_sql = unregister_sql(self.model, connection.vendor)
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(entry_sql, [pk])
            deleted = cursor.fetchone()
            if deleted is None:
                return False
            for sql in dependents_sql:
                cursor.execute(sql, [pk])
            self.model.record_change(pk, deleted[0], ChangeStatus.UNREGISTERED, ChangeReason.UNREGISTERED, now)
        return True

    def sweep(self, now, batch=1000):
        """Move stored statuses alive → suspect → stale; record each change.

        Each row is claimed with a conditional UPDATE on its old status and
        last_seen_at, so two sweepers at once never record a change twice and
        a heartbeat that lands in between is never overwritten. A change is
        stamped with the moment the new status began, however late the sweep
        runs, and a sweep past the TTL records the suspect spell before the
        stale one (``record_missed``). At most ``batch`` rows per call; returns how many changed.
        """
        ttl_s, interval_s = self.model.ttl_s(), self.model.heartbeat_interval_s()
        due = self.filter(
            (Q(status=Status.ALIVE) & liveness.past_alive_window_q(now, ttl_s, interval_s))
            | (Q(status=Status.SUSPECT) & liveness.status_q(Status.STALE, now, ttl_s, interval_s))
        ).values_list("pk", "status", "last_seen_at")[:batch]
        changed = 0
        for pk, old_status, seen in list(due):
            new_status = liveness.status_at(seen, now, ttl_s, interval_s)
            if new_status == old_status:
                continue
            with transaction.atomic():
                if self.filter(pk=pk, status=old_status, last_seen_at=seen).update(status=new_status):
                    self.record_missed(pk, old_status, seen, now)
                    changed += 1
        return changed

    def delete_expired(self, now, retention_s):
        """Delete entries not seen for ``retention_s``; returns how many.

        The ``expired`` change is stamped with the moment the retention ran out.
        """
        cut = now - retention_s
        deleted = 0
        for pk, old_status, seen in list(self.filter(last_seen_at__lt=cut).values_list("pk", "status", "last_seen_at")):
            with transaction.atomic():
                if self.filter(pk=pk, last_seen_at__lt=cut).delete()[0]:
                    self.model.record_change(
                        pk, old_status, ChangeStatus.EXPIRED, ChangeReason.RETENTION_PASSED, seen + retention_s
                    )
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

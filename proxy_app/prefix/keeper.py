"""This web process's copy of the pool prefix index (SPEC 15.4), kept from the database.

The durable state is ``PrefixBlock`` (which stream holds which key) and
``PrefixEngine`` (each stream's epoch and seq); every applied body also
leaves a ``PrefixChange`` row (``proxy_app.prefix.store``). A copy is built
once from the whole table (``rebuild``), then follows the change rows: when
placement asks with a prompt and the copy is older than ``REFRESH_FACTOR`` ×
``FLEETWATCH_PLACEMENT_REFRESH_S`` (0.5 s), it reads the rows stamped since its last read (less ``OVERLAP_S``,
for writes committed late, each row applied once). A change is applied
only when it is the next of its stream (its reset, or seq + 1); one that
shows the copy missed something reloads that stream from ``PrefixBlock``.
An instance that unregistered or expired since (its status change) loses
its streams; a copy that has not read for longer than the change rows are
kept rebuilds. So every web process of every replica sees an update within
that interval plus a query, and a restarted one is whole after its first
read (``bench/README.md`` measures what that read costs per million keys).

Learned mode's records (``PrefixLearned``) are followed the same way.
"""

import threading

import numpy as np
from django.conf import settings
from django.db import connection

from controlplane.endpoints.boards import OVERLAP_S
from controlplane.endpoints.liveness import ChangeStatus
from proxy_app.models import Instance, InstanceStatusChange, PrefixBlock, PrefixChange, PrefixEngine, PrefixLearned
from proxy_app.placement.decision import EVENTS
from proxy_app.prefix.index import LearnedIndex, PrefixIndex
from proxy_app.prefix.store import CHANGE_KEEP_S, from_bytes

# At most every 2 × FLEETWATCH_PLACEMENT_REFRESH_S (0.5 s by default; 0: on every request).
REFRESH_FACTOR = 2
SWEEP_LEARNED_S = 5.0
CHANGE_FIELDS = ("id", "instance_id", "slot", "epoch", "seq", "reset", "added", "removed", "at")


class PrefixKeeper:
    def __init__(self):
        self._lock = threading.Lock()
        self.reset()

    def reset(self):
        self.index = PrefixIndex()
        self.learned = LearnedIndex()
        self.streams = {}  # PrefixEngine id -> [instance_id, epoch, seq]
        self.seen = {}  # ids of change rows applied within the overlap -> their stamp
        self.seen_learned = {}
        self.read_at = None
        self.swept_at = None

    def hits(self, source, keys, now):
        """``{instance_id: leading blocks held}`` of ``keys``, from the events' index or learned mode's."""
        with self._lock:
            self._refresh(now)
            if source == EVENTS:
                return self.index.hits(keys)
            return self.learned.hits(keys, now)

    def learn(self, instance_id, keys, now, expires_at):
        """A record this process just stored: held at once, without waiting for the next read."""
        with self._lock:
            self.learned.record(instance_id, keys, expires_at)

    def refresh(self, now):
        with self._lock:
            self._refresh(now)

    def _refresh(self, now):
        refresh_s = REFRESH_FACTOR * settings.FLEETWATCH_PLACEMENT_REFRESH_S
        if self.read_at is not None and refresh_s > 0 and 0 <= now - self.read_at < refresh_s:
            return
        if self.read_at is None or not 0 <= now - self.read_at < CHANGE_KEEP_S - OVERLAP_S:
            self._rebuild(now)
        else:
            since = self.read_at - OVERLAP_S
            self._follow(since)
            self._follow_learned(since)
            self._drop_ended(since)
        if self.swept_at is None or not 0 <= now - self.swept_at < SWEEP_LEARNED_S:
            self.learned.sweep(now)
            self.swept_at = now
        self.read_at = now

    def _rebuild(self, now):
        """The whole index afresh from the table; changes stamped from now on are followed after."""
        self.reset()
        self.streams = {pk: [instance_id, epoch, seq] for pk, instance_id, epoch, seq in
                        PrefixEngine.objects.values_list("id", "instance_id", "epoch", "seq")}
        known = np.array(sorted(self.streams), dtype=np.int64)
        slots, keys = [], []
        for chunk in _pairs():
            position = np.searchsorted(known, chunk[:, 0])
            found = position < len(known)
            found[found] = known[position[found]] == chunk[found, 0]  # a stream created since is followed later
            slots.append(position[found].astype(np.int32))
            keys.append(chunk[found, 1])
        owners = [(stream, self.streams[stream][0]) for stream in known.tolist()]
        self.index.load(owners, np.concatenate(slots) if slots else [], np.concatenate(keys) if keys else [])
        for pk, instance_id, keys, expires_at in PrefixLearned.objects.filter(expires_at__gt=now).values_list(
                "id", "instance_id", "keys", "expires_at"):
            self.learned.record(instance_id, from_bytes(keys), expires_at)
        # What was stored up to here is in: the rows of the overlap are applied again only if they are next.
        self.seen = {}

    def _follow(self, since):
        rows = PrefixChange.objects.filter(at__gte=since).order_by("id").values_list(*CHANGE_FIELDS)
        seen = {pk: at for pk, at in self.seen.items() if at >= since}
        for pk, instance_id, slot, epoch, seq, reset, added, removed, at in rows:
            if pk in seen:
                continue
            seen[pk] = at
            stream = self.streams.get(slot)
            if reset:
                self.index.apply(slot, instance_id, from_bytes(added), reset=True)
            elif stream is not None and stream[1] == epoch and seq == stream[2] + 1:
                self.index.apply(slot, instance_id, from_bytes(added), from_bytes(removed))
            elif stream is not None and stream[1] == epoch and seq <= stream[2]:
                continue  # in the copy already (read by a rebuild)
            else:
                self._reload(slot)
                continue
            self.streams[slot] = [instance_id, epoch, seq]
        self.seen = seen

    def _reload(self, slot):
        """One stream afresh from the table (the copy missed one of its changes)."""
        row = PrefixEngine.objects.filter(pk=slot).values_list("instance_id", "epoch", "seq").first()
        if row is None:
            self.index.drop(slot)
            self.streams.pop(slot, None)
            return
        keys = np.fromiter(PrefixBlock.objects.filter(slot=slot).values_list("key", flat=True), np.int64)
        self.index.apply(slot, row[0], keys, reset=True)
        self.streams[slot] = list(row)

    def _follow_learned(self, since):
        rows = PrefixLearned.objects.filter(at__gte=since).values_list("id", "instance_id", "keys", "at",
                                                                      "expires_at")
        seen = {pk: at for pk, at in self.seen_learned.items() if at >= since}
        for pk, instance_id, keys, at, expires_at in rows:
            if pk not in seen:
                seen[pk] = at
                self.learned.record(instance_id, from_bytes(keys), expires_at)
        self.seen_learned = seen

    def _drop_ended(self, since):
        """Forget the streams (and learned records) of instances that unregistered or expired since."""
        ended = set(InstanceStatusChange.objects.filter(
            at__gt=since, new_status__in=(ChangeStatus.UNREGISTERED, ChangeStatus.EXPIRED),
        ).values_list("instance_id", flat=True))
        if not ended:
            return
        kept = set(PrefixEngine.objects.filter(instance_id__in=ended).values_list("id", flat=True))
        for slot in [slot for slot, stream in self.streams.items() if stream[0] in ended and slot not in kept]:
            self.index.drop(slot)
            del self.streams[slot]
        for instance_id in ended - set(Instance.objects.filter(pk__in=ended).values_list("pk", flat=True)):
            self.learned.drop(instance_id)

    def nbytes(self):
        return self.index.nbytes()


READ_CHUNK = 65536


def _pairs():
    """Every (stream, key) of the table, as int64 arrays of at most ``READ_CHUNK`` rows (the whole table as
    Python tuples at once would cost ten times the index it builds)."""
    table = connection.ops.quote_name(PrefixBlock._meta.db_table)
    with connection.chunked_cursor() as cursor:  # server-side on PostgreSQL: the table never sits in memory whole
        cursor.execute(f"SELECT slot, key FROM {table}")
        while True:
            rows = cursor.fetchmany(READ_CHUNK)
            if not rows:
                return
            yield np.array(rows, dtype=np.int64).reshape(-1, 2)


PREFIX = PrefixKeeper()

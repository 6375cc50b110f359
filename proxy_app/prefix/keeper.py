"""This web process's copy of the pool prefix index (SPEC 15.4), kept from the database.

The durable state is ``PrefixBlock`` (which stream holds which key) and
``PrefixEngine`` (each stream's epoch and seq); every applied body also
leaves a ``PrefixChange`` row (``proxy_app.prefix.store``). A copy is built
once from the whole table (``rebuild``), then follows the change rows: it
reads the rows stamped since its last read (less ``OVERLAP_S``, for writes
committed late, each row applied once). A change is applied only when it is
the next of its stream (its reset, or seq + 1); one that shows the copy
missed something reloads that stream from ``PrefixBlock``. An instance that
unregistered or expired since (its status change) loses its streams; a copy
that has not read for longer than the change rows are kept rebuilds.

Who reads: the first request that asks with a prompt builds the copy (every
request of the process waits for that once); from then on a daemon thread
(``proxy_app.prefix.follower``) catches up every ``REFRESH_FACTOR`` ×
``FLEETWATCH_PLACEMENT_REFRESH_S`` (0.5 s), and requests only look up. The
thread reads the database without the copy's lock and takes it per change
it applies; a merge of the index's delta is computed beside the lookups and
put in place under the lock. With ``FLEETWATCH_PLACEMENT_REFRESH_S`` 0 (the
tests), or ``follow_in_thread=False``, there is no thread: each request
catches up itself when the copy is due (``refresh``), as the first does. So
every web process of every replica sees an update within that interval plus
a read, and a restarted one is whole after its first read
(``bench/README.md`` measures what that read costs per million keys).

Learned mode's records (``PrefixLearned``) are followed the same way.
"""

import threading
import time

import numpy as np
from django.conf import settings
from django.db import connection

from controlplane import clock
from controlplane.endpoints.boards import OVERLAP_S
from controlplane.endpoints.liveness import ChangeStatus
from proxy_app.models import Instance, InstanceStatusChange, PrefixBlock, PrefixChange, PrefixEngine, PrefixLearned
from proxy_app.placement.decision import EVENTS
from proxy_app.prefix.follower import Follower
from proxy_app.prefix.index import LearnedIndex, PrefixIndex
from proxy_app.prefix.store import CHANGE_KEEP_S, from_bytes

# Every 2 × FLEETWATCH_PLACEMENT_REFRESH_S (0.5 s by default; 0: on every request, no thread).
REFRESH_FACTOR = 2
SWEEP_LEARNED_S = 5.0
CHANGE_FIELDS = ("id", "instance_id", "slot", "epoch", "seq", "reset", "added", "removed", "at")
# The follower lets a request thread have the interpreter between so many changes applied.
YIELD_EVERY = 64


class PrefixKeeper:
    def __init__(self, follow_in_thread=True):
        self._lock = threading.Lock()  # the copy: every lookup, and every change put in it
        self._catching_up = threading.Lock()  # one reader of the database at a time (the thread, or a request)
        self.follow_in_thread = follow_in_thread
        self.follower = Follower("fleetwatch-prefix-follower", self.catch_up, self.interval_s)
        self._clear()

    def reset(self):
        """An empty copy (tests): the follower thread, if one runs, ends; the next request builds afresh."""
        self.follower.stop()
        with self._catching_up, self._lock:
            self._clear()

    def _clear(self):
        self.index = PrefixIndex()
        self.learned = LearnedIndex()
        self.streams = {}  # PrefixEngine id -> [instance_id, epoch, seq]
        self.seen = {}  # ids of change rows applied within the overlap -> their stamp
        self.seen_learned = {}
        self.read_at = None
        self.swept_at = None

    @staticmethod
    def interval_s():
        return REFRESH_FACTOR * settings.FLEETWATCH_PLACEMENT_REFRESH_S

    def threaded(self):
        return self.follow_in_thread and self.interval_s() > 0

    def hits(self, source, keys, now):
        """``{instance_id: leading blocks held}`` of ``keys``, from the events' index or learned mode's."""
        if self.read_at is None or not self.threaded():
            self.refresh(now)
        if self.threaded():
            self.follower.ensure_running()
        with self._lock:
            if source == EVENTS:
                return self.index.hits(keys)
            return self.learned.hits(keys, now)

    def learn(self, instance_id, keys, now, expires_at):
        """A record this process just stored: held at once, without waiting for the next read."""
        with self._lock:
            self.learned.record(instance_id, keys, expires_at)

    def refresh(self, now):
        """Catch up now if the copy is due (never read, or older than ``interval_s``): the synchronous way, which
        the first request, the tests and the requests of a process without the thread take."""
        with self._catching_up:
            refresh_s = self.interval_s()
            if self.read_at is not None and refresh_s > 0 and 0 <= now - self.read_at < refresh_s:
                return
            self._catch_up(now)

    def catch_up(self):
        """The follower thread's round: catch up, due or not (it wakes once an interval)."""
        with self._catching_up:
            self._catch_up(clock.now())

    def _catch_up(self, now):
        if self.read_at is None or not 0 <= now - self.read_at < CHANGE_KEEP_S - OVERLAP_S:
            self._rebuild(now)
        else:
            since = self.read_at - OVERLAP_S
            self._follow(since)
            self._follow_learned(since)
            self._drop_ended(since)
        if self.swept_at is None or not 0 <= now - self.swept_at < SWEEP_LEARNED_S:
            with self._lock:
                self.learned.sweep(now)
            self.swept_at = now
        if self.index.merge_due():
            merged = self.index.merged()  # only reads the index: lookups go on meanwhile
            with self._lock:
                self.index.install(merged)
        self.read_at = now

    def _rebuild(self, now):
        """The whole index afresh from the table, put in place at once; changes stamped from now on are
        followed after."""
        streams = {pk: [instance_id, epoch, seq] for pk, instance_id, epoch, seq in
                   PrefixEngine.objects.values_list("id", "instance_id", "epoch", "seq")}
        known = np.array(sorted(streams), dtype=np.int64)
        slots, keys = [], []
        for chunk in _pairs():
            position = np.searchsorted(known, chunk[:, 0])
            found = position < len(known)
            found[found] = known[position[found]] == chunk[found, 0]  # a stream created since is followed later
            slots.append(position[found].astype(np.int32))
            keys.append(chunk[found, 1])
        owners = [(stream, streams[stream][0]) for stream in known.tolist()]
        index = PrefixIndex()
        index.load(owners, np.concatenate(slots) if slots else [], np.concatenate(keys) if keys else [])
        learned = LearnedIndex()
        for pk, instance_id, keys, expires_at in PrefixLearned.objects.filter(expires_at__gt=now).values_list(
                "id", "instance_id", "keys", "expires_at"):
            learned.record(instance_id, from_bytes(keys), expires_at)
        with self._lock:
            self.index, self.learned, self.streams = index, learned, streams
        # What was stored up to here is in: the rows of the overlap are applied again only if they are next.
        self.seen, self.seen_learned = {}, {}

    def _follow(self, since):
        rows = list(PrefixChange.objects.filter(at__gte=since).order_by("id").values_list(*CHANGE_FIELDS))
        seen = {pk: at for pk, at in self.seen.items() if at >= since}
        for n, (pk, instance_id, slot, epoch, seq, reset, added, removed, at) in enumerate(rows):
            if pk in seen:
                continue
            seen[pk] = at
            stream = self.streams.get(slot)
            if reset:
                change = (from_bytes(added), ())
            elif stream is not None and stream[1] == epoch and seq == stream[2] + 1:
                change = (from_bytes(added), from_bytes(removed))
            elif stream is not None and stream[1] == epoch and seq <= stream[2]:
                continue  # in the copy already (read by a rebuild)
            else:
                self._reload(slot)
                continue
            with self._lock:
                self.index.apply(slot, instance_id, *change, reset=reset, merge=False)
            self.streams[slot] = [instance_id, epoch, seq]
            if n % YIELD_EVERY == YIELD_EVERY - 1:
                time.sleep(0)  # a request thread waiting for the interpreter runs now, not after the whole batch
        self.seen = seen

    def _reload(self, slot):
        """One stream afresh from the table (the copy missed one of its changes)."""
        row = PrefixEngine.objects.filter(pk=slot).values_list("instance_id", "epoch", "seq").first()
        if row is None:
            with self._lock:
                self.index.drop(slot)
            self.streams.pop(slot, None)
            return
        keys = np.fromiter(PrefixBlock.objects.filter(slot=slot).values_list("key", flat=True), np.int64)
        with self._lock:
            self.index.apply(slot, row[0], keys, reset=True, merge=False)
        self.streams[slot] = list(row)

    def _follow_learned(self, since):
        rows = PrefixLearned.objects.filter(at__gte=since).values_list("id", "instance_id", "keys", "at",
                                                                      "expires_at")
        seen = {pk: at for pk, at in self.seen_learned.items() if at >= since}
        for pk, instance_id, keys, at, expires_at in rows:
            if pk not in seen:
                seen[pk] = at
                with self._lock:
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
        gone = ended - set(Instance.objects.filter(pk__in=ended).values_list("pk", flat=True))
        with self._lock:
            for slot in [slot for slot, stream in self.streams.items() if stream[0] in ended and slot not in kept]:
                self.index.drop(slot)
                del self.streams[slot]
            for instance_id in gone:
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

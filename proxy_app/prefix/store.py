"""The pool prefix index's durable state (SPEC 15.3, 15.4): what a body applies, and what learned mode records.

Every write is one transaction: the engine's stream row (``PrefixEngine``,
locked), its keys (``PrefixBlock``: one statement per list, ``unnest`` of an
array on PostgreSQL, ``executemany`` on SQLite), and one ``PrefixChange`` row
with the body's lists as int64 bytes, which the web processes' copies
(``proxy_app.prefix.keeper``) read to follow. Nothing is written for a body
answered ``resync`` or ``unknown_instance``.

Stream rules (an agent sends one body at a time per engine):
``reset`` starts the stream over at (epoch, seq), forgetting its keys, then
adds ``added`` (``removed`` means nothing after a reset); otherwise the body
applies when its epoch is the stream's and its seq the next one. The same
seq again is a retry of a body already applied (answered, not applied
twice); any other seq, another epoch or no stream at all (never reset, or
its instance left and came back) is ``resync``.
"""

import enum
import time

import numpy as np
from django.db import IntegrityError, connection, transaction
from prometheus_client import Counter

from proxy_app.models import Instance, PrefixBlock, PrefixChange, PrefixEngine, PrefixLearned
from proxy_app.pool.summary import proxy_id

# Counted by each process (summed over the web processes in prometheus_client's multiprocess mode), with this
# Proxy's id as every Proxy family carries it.
UPDATES = Counter("fleetwatch_prefix_updates", "Prefix-block bodies applied (SPEC 15.3).", ["proxy_id"])
RESYNCS = Counter("fleetwatch_prefix_resyncs", "Prefix-block bodies answered resync: the agent must send a reset.",
                  ["proxy_id"])
# How long the change rows stay readable; a copy further behind rebuilds from PrefixBlock.
CHANGE_KEEP_S = 120.0
PRUNE_EVERY_S = 10.0
CREATE_RACE_TRIES = 3  # the second finds the stream the winner of a race made; the third is to spare
_pruned_at = [0.0]


class Outcome(enum.Enum):
    APPLIED = "applied"
    RESYNC = "resync"
    UNKNOWN = "unknown_instance"


def as_bytes(keys):
    return np.asarray(keys, dtype="<i8").tobytes()


def from_bytes(data):
    return np.frombuffer(bytes(data), dtype="<i8")


def _table():
    return connection.ops.quote_name(PrefixBlock._meta.db_table)


def _insert(instance_id, slot, keys):
    """Add ``keys`` to a stream (those it holds already are skipped); how many were new."""
    if not keys:
        return 0
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"INSERT INTO {_table()} (instance_id, slot, key) SELECT %s, %s, unnest(%s::bigint[]) "
                           f"ON CONFLICT DO NOTHING", [instance_id, slot, list(keys)])
        else:
            cursor.executemany(f"INSERT OR IGNORE INTO {_table()} (instance_id, slot, key) VALUES (%s, %s, %s)",
                               [(instance_id, slot, key) for key in keys])
        return max(0, cursor.rowcount)


def _delete(slot, keys):
    """Remove ``keys`` from a stream; how many it held."""
    if not keys:
        return 0
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"DELETE FROM {_table()} WHERE slot = %s AND key = ANY(%s::bigint[])", [slot, list(keys)])
        else:
            cursor.executemany(f"DELETE FROM {_table()} WHERE slot = %s AND key = %s", [(slot, key) for key in keys])
        return max(0, cursor.rowcount)


def _clear(slot):
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {_table()} WHERE slot = %s", [slot])


def apply_body(body, now):
    """Apply one checked body (``proxy_app.api.prefix``) at ``now``; its ``Outcome``. An instance unregistered
    while its body was being stored (its key refused at commit) is unknown, as it would be a moment later.

    Any other refusal is a race: concurrent resets of a new engine each create its stream, and all but the first
    are refused by ``prefix_engine_once`` (PostgreSQL; SQLite writes one at a time). That body is applied again,
    now to the stream the first one made, under its row lock: only a missing instance is unknown.
    """
    tries = 1
    while True:
        try:
            return _apply(body, now)
        except IntegrityError:
            if not Instance.objects.filter(pk=body["instance_id"]).exists():
                return Outcome.UNKNOWN
            if tries == CREATE_RACE_TRIES:
                raise
            tries += 1


def _apply(body, now):
    instance_id, engine = body["instance_id"], body["engine"]
    epoch, seq, reset = body["epoch"], body["seq"], body["reset"]
    added, removed = body["added"], body["removed"]
    with transaction.atomic():
        if not Instance.objects.filter(pk=instance_id).exists():
            return Outcome.UNKNOWN
        stream = PrefixEngine.objects.select_for_update().filter(instance_id=instance_id, engine=engine).first()
        if reset:
            if stream is None:
                stream = PrefixEngine.objects.create(instance_id=instance_id, engine=engine, epoch=epoch, seq=seq,
                                                     changed_at=now)
            else:
                _clear(stream.pk)
            stream.blocks = _insert(instance_id, stream.pk, added)
            removed = []
        elif stream is None or stream.epoch != epoch or seq not in (stream.seq, stream.seq + 1):
            RESYNCS.labels(proxy_id()).inc()
            return Outcome.RESYNC
        elif seq == stream.seq:
            return Outcome.APPLIED  # a retry of the body applied last
        else:
            stream.blocks += _insert(instance_id, stream.pk, added) - _delete(stream.pk, removed)
        stream.epoch, stream.seq, stream.changed_at = epoch, seq, now
        stream.save(update_fields=["epoch", "seq", "blocks", "changed_at"])
        PrefixChange.objects.create(instance_id=instance_id, slot=stream.pk, engine=engine, epoch=epoch, seq=seq,
                                    reset=reset, added=as_bytes(added), removed=as_bytes(removed), at=now)
    UPDATES.labels(proxy_id()).inc()
    _prune(now)
    return Outcome.APPLIED


def record_learned(instance_id, keys, now, ttl_s):
    """Learned mode (SPEC 15.5): ``keys`` placed on ``instance_id`` count as cached there for ``ttl_s``."""
    if keys and ttl_s > 0:
        try:
            with transaction.atomic():
                PrefixLearned.objects.create(instance_id=instance_id, keys=as_bytes(keys), at=now,
                                             expires_at=now + ttl_s)
        except IntegrityError:
            return  # the instance left meanwhile: nothing to learn about it
        _prune(now)


def _prune(now):
    """At most every ``PRUNE_EVERY_S`` per process: drop change rows past ``CHANGE_KEEP_S`` and expired records."""
    if 0 <= time.monotonic() - _pruned_at[0] < PRUNE_EVERY_S:
        return
    _pruned_at[0] = time.monotonic()
    PrefixChange.objects.filter(at__lt=now - CHANGE_KEEP_S).delete()
    PrefixLearned.objects.filter(expires_at__lt=now).delete()


def blocks_by_instance(instance_ids=None):
    """``{instance_id: keys indexed}`` from the streams' counts (``/metrics``, the instance page)."""
    rows = PrefixEngine.objects.all()
    if instance_ids is not None:
        rows = rows.filter(instance_id__in=list(instance_ids))
    totals = {}
    for instance_id, blocks in rows.values_list("instance_id", "blocks"):
        totals[instance_id] = totals.get(instance_id, 0) + blocks
    return totals

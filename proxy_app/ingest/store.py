"""Snapshot ingest (SPEC 3, 3.1): the hot path of the Proxy.

One report is normalised (``normalise_snapshot``, pure), then stored with one
contact UPDATE and two upserts, its columns and the snapshot as sent: one
statement on PostgreSQL, one write transaction on SQLite
(``sql.touch_and_store``). Only an instance that is unknown,
or not stored as alive within its TTL, takes the slower path that revives it
and records its status changes.
"""

import enum

import orjson
from django.db import transaction

from controlplane.endpoints.liveness import ChangeReason
from proxy_app.ingest import sql
from proxy_app.ingest.normalise import normalise_snapshot
from proxy_app.managers import UNKNOWN_INSTANCE
from proxy_app.models import Instance


class IngestResult(enum.Enum):
    STORED = "stored"
    STALE = "stale"  # an older report_seq than the stored one: not applied
    UNKNOWN = UNKNOWN_INSTANCE


def _result(stored):
    return IngestResult.STORED if stored else IngestResult.STALE


def ingest_snapshot(instance_id, snapshot, metadata, now):
    """Store the latest snapshot of an instance, normalised; a late report still counts as contact."""
    return store_snapshot(instance_id, *prepare_snapshot(snapshot, metadata, now), now)


def prepare_snapshot(snapshot, metadata, now):
    """``(columns, raw_json)``: the report normalised, and the snapshot as sent encoded, before the
    statements (SQLite's write lock is held briefly)."""
    columns = normalise_snapshot(snapshot, metadata, now)
    return columns, orjson.dumps(columns["raw_resource"]).decode()


def store_snapshot(instance_id, columns, raw_json, now):
    """Store a prepared report (``prepare_snapshot``): the statements alone."""
    touched, stored = sql.touch_and_store(instance_id, columns, raw_json, now)
    if touched:
        return _result(stored)
    with transaction.atomic():
        # The contact UPDATE found it unknown or not alive: revive it, recording its status changes.
        if not Instance.objects.revive(instance_id, now, ChangeReason.SNAPSHOT, **sql.contact_fields(columns)):
            return IngestResult.UNKNOWN
        stored = sql.store_latest(instance_id, columns, raw_json)
    return _result(stored)

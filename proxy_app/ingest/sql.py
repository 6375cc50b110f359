"""The SQL of the snapshot hot path, built once per database vendor.

``proxy_app.ingest.store`` is the only caller. Each statement is cached, and the
values are the plain numbers and strings that ``normalise_snapshot``
returns, so no ORM query building runs per snapshot. The contact UPDATE is
the one every touch uses (``touch_alive_sql``); a report with an ``ok``
engine also marks the instance as having had one (``had_ok_engine``), so
the next report that shows its engines down fences it at once (SPEC 14.2).
"""

import functools
import re

import orjson
from django.db import DEFAULT_DB_ALIAS, connection, connections

from controlplane.endpoints.managers import touch_alive_params, touch_alive_sql
from proxy_app.ingest.normalise import RESOURCE_FIELDS
from proxy_app.models import Instance, InstanceResource, InstanceSnapshot

# Columns of the latest-resource upsert, in statement order: the listed fields, then two the Proxy keeps for
# itself (whether the snapshot said anything; how many engines publish KV-cache events, SPEC 15.2; the served
# adapters' parents, SPEC 16.1).
UPSERT_COLUMNS = ("instance_id", *RESOURCE_FIELDS, "has_raw_resource", "kv_events_ok_count", "adapter_parents")
# The normalised lists: the engines' model names and running LoRAs.
JSON_LISTS = ("engine_models", "engine_loras")
_JSON_LIST_AT = tuple(RESOURCE_FIELDS.index(name) for name in JSON_LISTS)
# Columns of the snapshot-as-sent upsert.
SNAPSHOT_COLUMNS = ("instance_id", "raw_resource")


_PLAIN_NAME = re.compile(r"[a-z_][a-z0-9_]*")


def _name(column):
    """A column as these statements name it: bare when it is a plain lowercase identifier (every column
    here is), quoted otherwise.

    Bare names keep PostgreSQL's one ingest statement, which names each
    resource column four times, under psycopg's 4,096 bytes for caching its
    parse of a statement (``MAX_CACHED_STATEMENT_LENGTH``): past it, psycopg
    parses the statement again at every report (~0.1 ms of web CPU).
    ``tests/proxy/test_ingest_statement.py`` holds both limits.
    """
    return column if _PLAIN_NAME.fullmatch(column) else connection.ops.quote_name(column)


def _quoted(names):
    return ", ".join(_name(name) for name in names)


@functools.lru_cache(maxsize=4)
def _on_conflict(vendor):
    """The upsert's conflict clause: replace the stored resource unless the report is a late one.

    A lower ``report_seq`` than the stored one is late, unless its wall time
    is newer (the agent restarted and its sequence began again).
    """
    table = connection.ops.quote_name(InstanceResource._meta.db_table)
    updates = ", ".join(f"{_name(n)} = excluded.{_name(n)}" for n in UPSERT_COLUMNS[1:])
    seq, wall = _name("report_seq"), _name("resource_report_wall_time_ms")
    return (
        f"ON CONFLICT ({_name('instance_id')}) DO UPDATE SET {updates} "
        f"WHERE NOT COALESCE(excluded.{seq} < {table}.{seq}, FALSE) "
        f"OR COALESCE(excluded.{wall} > {table}.{wall}, FALSE)"
    )


@functools.lru_cache(maxsize=4)
def _upsert_sql(vendor):
    placeholders = ", ".join("%s" for _ in UPSERT_COLUMNS)
    return (
        f"INSERT INTO {connection.ops.quote_name(InstanceResource._meta.db_table)} ({_quoted(UPSERT_COLUMNS)}) "
        f"VALUES ({placeholders}) {_on_conflict(vendor)}"
    )


def _snapshot_on_conflict():
    """The snapshot's conflict clause: replace it (the caller writes it only when its resource was stored)."""
    raw = _name("raw_resource")
    return f"ON CONFLICT ({_name('instance_id')}) DO UPDATE SET {raw} = excluded.{raw}"


@functools.lru_cache(maxsize=4)
def _snapshot_sql(vendor):
    """The snapshot as sent, written only when its resource was (never for a late report)."""
    return (
        f"INSERT INTO {connection.ops.quote_name(InstanceSnapshot._meta.db_table)} ({_quoted(SNAPSHOT_COLUMNS)}) "
        f"VALUES (%s, %s) {_snapshot_on_conflict()}"
    )


def _upsert_values(columns):
    """The upsert's values after ``instance_id``, in ``UPSERT_COLUMNS`` order."""
    # normalise_snapshot yields plain floats, ints, strings and None, which
    # every driver takes as they are, and two lists (JSON_LISTS), kept as JSON text.
    values = [columns[name] for name in RESOURCE_FIELDS]
    for index in _JSON_LIST_AT:
        if values[index] is not None:
            values[index] = orjson.dumps(values[index]).decode()
    values.append(bool(columns["raw_resource"]))
    values.append(columns.get("kv_events_ok_count"))
    parents = columns.get("adapter_parents")
    values.append(None if parents is None else orjson.dumps(parents).decode())
    return values


def store_latest(instance_id, columns, raw_json):
    """Upsert an instance's latest resource, then its snapshot as sent (``raw_json``, text:
    orjson takes a tenth of the standard encoder's time); False when skipped as late."""
    with connection.cursor() as cursor:
        cursor.execute(_upsert_sql(connection.vendor), [instance_id, *_upsert_values(columns)])
        if cursor.rowcount != 1:
            return False
        cursor.execute(_snapshot_sql(connection.vendor), [instance_id, raw_json])
    return True


def contact_fields(columns):
    """What a report's contact UPDATE sets besides ``last_seen_at``: ``had_ok_engine`` once an engine was ok."""
    return {"had_ok_engine": True} if columns["engine_ok_count"] else {}


@functools.lru_cache(maxsize=8)
def _touch_sql(vendor, fields):
    return touch_alive_sql(Instance._meta.db_table, Instance._meta.pk.column, tuple(fields))


@functools.lru_cache(maxsize=8)
def _touch_and_store_sql(vendor, fields):
    """PostgreSQL: touch an alive instance, upsert its resource and its snapshot in one statement.

    Saves BEGIN, COMMIT and statements' round trips on the hot path; the
    statement is atomic by itself. Answers (touched, stored) counts. The
    values go bare: in ``INSERT … SELECT`` PostgreSQL gives a literal (and
    NULL) its target column's type, as ``INSERT … VALUES`` does, so the
    statement needs no cast (the normaliser bounds every text to its column).
    """
    quote = connection.ops.quote_name
    selected = ", ".join("touched.instance_id" if name == "instance_id" else "%s" for name in UPSERT_COLUMNS)
    touch = _touch_sql(vendor, fields)
    return (
        f"WITH touched AS ({touch} RETURNING {quote(Instance._meta.pk.column)} AS instance_id), "
        f"stored AS (INSERT INTO {quote(InstanceResource._meta.db_table)} ({_quoted(UPSERT_COLUMNS)}) "
        f"SELECT {selected} FROM touched {_on_conflict(vendor)} "
        f"RETURNING {_name('instance_id')}), "
        f"raw AS (INSERT INTO {quote(InstanceSnapshot._meta.db_table)} ({_quoted(SNAPSHOT_COLUMNS)}) "
        f"SELECT stored.instance_id, %s FROM stored {_snapshot_on_conflict()}) "
        f"SELECT (SELECT count(*) FROM touched), (SELECT count(*) FROM stored)"
    )


def touch_and_store(instance_id, columns, raw_json, now):
    """(touched, stored) for an instance stored as alive; (0, 0) sends the caller the slow way.

    One statement on PostgreSQL (atomic by itself). SQLite has no
    data-modifying CTE: the contact UPDATE and the two upserts, each cached,
    in one ``BEGIN IMMEDIATE`` … ``COMMIT`` through the writer queue
    (``sqlite_backend.write_transaction``), without ``atomic``'s bookkeeping.
    Either way the report is committed before the caller answers.
    """
    db = connections[DEFAULT_DB_ALIAS]  # looked up once: each use of the ``connection`` proxy is a lookup
    fields = contact_fields(columns)
    touch_params = touch_alive_params(Instance, instance_id, now, fields)
    values = _upsert_values(columns)
    if db.vendor == "postgresql":
        with db.cursor() as cursor:
            cursor.execute(_touch_and_store_sql(db.vendor, tuple(fields)), [*touch_params, *values, raw_json])
            return cursor.fetchone()
    with db.write_transaction() as run:
        if run(_touch_sql(db.vendor, tuple(fields)), touch_params) != 1:
            return 0, 0
        if run(_upsert_sql(db.vendor), [instance_id, *values]) != 1:
            return 1, 0
        run(_snapshot_sql(db.vendor), [instance_id, raw_json])
    return 1, 1

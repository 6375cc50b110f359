"""The SQL of the snapshot hot path, written out once per database vendor.

``Instance.objects.ingest_snapshot`` is the only caller. Each statement is
built once and cached; the values are the plain numbers and strings that
``normalise_snapshot`` returns, so no ORM query building runs per snapshot.
"""

import functools

from django.db import connection

from controlplane.liveness import Status
from proxy_app.normalise import RESOURCE_FIELDS

# Columns of the latest-resource upsert, in statement order.
UPSERT_COLUMNS = ("instance_id", *RESOURCE_FIELDS, "has_raw_resource", "raw_resource")


@functools.lru_cache(maxsize=8)
def _touch_sql(vendor, table_name):
    quote = connection.ops.quote_name
    return (
        f"UPDATE {quote(table_name)} SET {quote('last_seen_at')} = %s "
        f"WHERE {quote('instance_id')} = %s AND {quote('status')} = %s AND {quote('last_seen_at')} >= %s"
    )


def touch_if_alive(instance_model, instance_id, now):
    """The snapshot hot path of ``touch``: one prepared UPDATE, no ORM query building.

    False when the instance is unknown, not stored as alive or past its TTL;
    the caller then takes ``touch``, which revives it and records the changes.
    """
    params = [now, instance_id, Status.ALIVE.value, now - instance_model.ttl_s()]
    with connection.cursor() as cursor:
        cursor.execute(_touch_sql(connection.vendor, instance_model._meta.db_table), params)
        return cursor.rowcount == 1


@functools.lru_cache(maxsize=8)
def _upsert_sql(vendor, table_name):
    """The upsert statement, built once per database vendor and table."""
    quote = connection.ops.quote_name
    table = quote(table_name)
    names = ", ".join(quote(name) for name in UPSERT_COLUMNS)
    placeholders = ", ".join(
        "%s::jsonb" if name == "raw_resource" and vendor == "postgresql" else "%s" for name in UPSERT_COLUMNS
    )
    updates = ", ".join(f"{quote(n)} = excluded.{quote(n)}" for n in UPSERT_COLUMNS[1:])
    seq, wall = quote("report_seq"), quote("resource_report_wall_time_ms")
    return (
        f"INSERT INTO {table} ({names}) VALUES ({placeholders}) "
        f"ON CONFLICT ({quote('instance_id')}) DO UPDATE SET {updates} "
        f"WHERE NOT COALESCE(excluded.{seq} < {table}.{seq}, FALSE) "
        f"OR COALESCE(excluded.{wall} > {table}.{wall}, FALSE)"
    )


def _upsert_values(instance_id, columns, raw_json):
    # normalise_snapshot yields plain floats, ints, strings and None, which
    # every driver takes as they are; the snapshot goes in as JSON text
    # (``raw_json``; orjson takes a tenth of the standard encoder's time).
    return {
        **columns,
        "instance_id": instance_id,
        "raw_resource": raw_json,
        "has_raw_resource": bool(columns["raw_resource"]),
    }


def upsert_latest_resource(resource_model, instance_id, columns, raw_json):
    """One INSERT … ON CONFLICT DO UPDATE of an instance's latest resource.

    The update is skipped for a late, reordered report: a lower ``report_seq``
    than the stored one, unless its wall time is newer (the agent restarted
    and its sequence began again). Returns False when skipped.
    """
    values = _upsert_values(instance_id, columns, raw_json)
    sql = _upsert_sql(connection.vendor, resource_model._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(sql, [values[name] for name in UPSERT_COLUMNS])
        return cursor.rowcount == 1


def one_statement_supported():
    """PostgreSQL can touch and upsert in one statement (a data-modifying CTE)."""
    return connection.vendor == "postgresql"


@functools.lru_cache(maxsize=4)
def _touch_and_upsert_sql(instance_table, resource_table):
    """PostgreSQL: touch an alive instance and upsert its resource in one round trip.

    Saves BEGIN, COMMIT and a statement's round trips on the hot path; the
    statement is atomic by itself. Answers (touched, stored) counts.
    """
    from proxy_app.models import InstanceResource

    quote = connection.ops.quote_name
    upsert = _upsert_sql(connection.vendor, resource_table)
    names = ", ".join(quote(name) for name in UPSERT_COLUMNS)
    fields = {"instance_id": None, **{f.column: f for f in InstanceResource._meta.concrete_fields}}
    selected = ", ".join(
        "touched.instance_id" if name == "instance_id"
        else f"%s::{fields[name].db_type(connection)}"
        for name in UPSERT_COLUMNS
    )
    conflict = upsert[upsert.index(" ON CONFLICT"):]
    return (
        f"WITH touched AS (UPDATE {quote(instance_table)} SET {quote('last_seen_at')} = %s "
        f"WHERE {quote('instance_id')} = %s AND {quote('status')} = %s AND {quote('last_seen_at')} >= %s "
        f"RETURNING {quote('instance_id')}), "
        f"stored AS (INSERT INTO {quote(resource_table)} ({names}) SELECT {selected} FROM touched"
        f"{conflict} RETURNING 1) "
        f"SELECT (SELECT count(*) FROM touched), (SELECT count(*) FROM stored)"
    )


def touch_and_upsert(instance_model, resource_model, instance_id, columns, raw_json, now):
    """(touched, stored) for an instance stored as alive; (0, 0) sends the caller the slow way."""
    sql = _touch_and_upsert_sql(instance_model._meta.db_table, resource_model._meta.db_table)
    values = _upsert_values(instance_id, columns, raw_json)
    params = [
        now, instance_id, Status.ALIVE.value, now - instance_model.ttl_s(),
        *(values[name] for name in UPSERT_COLUMNS[1:]),
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        touched, stored = cursor.fetchone()
    return touched, stored

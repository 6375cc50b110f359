"""Domain operations on instances: register, heartbeat, ingest, sweep, aggregate.

Views call exactly one of these; each is cheap on the hot path (heartbeat and
snapshot ingest are one conditional UPDATE plus one upsert) and safe when two
processes run it at once.
"""

import enum
import functools

import orjson

from django.db import IntegrityError, connection, transaction
from django.db.models import Avg, Count, Max, Min, Q, Sum

from controlplane.liveness import Status
from controlplane.managers import LivenessManager
from proxy_app.normalise import RESOURCE_FIELDS, normalise_snapshot


class IngestResult(enum.Enum):
    STORED = "stored"
    STALE = "stale"  # an older report_seq than the stored one: not applied
    UNKNOWN = "unknown_instance"


class InstanceManager(LivenessManager):
    """Instances; touch, unregister, sweep and delete_expired come from LivenessManager."""

    # --- writes -------------------------------------------------------------

    def register(self, *, instance_id, host, port, endpoints, tags, weight, meta, capabilities, now):
        """Create or refresh an instance (SPEC 3 re-register rules)."""
        fields = {"host": host, "port": port, "weight": weight}
        try:
            with transaction.atomic():
                instance = self.create(
                    instance_id=instance_id, endpoints=endpoints, tags=tags, meta=meta,
                    capabilities=capabilities, registered_at=now, last_seen_at=now,
                    status=Status.ALIVE, **fields,
                )
                self.model.record_change(instance_id, "", Status.ALIVE, "registered", now)
                return instance
        except IntegrityError:
            pass  # known id (or a concurrent first register): refresh it below
        with transaction.atomic():
            instance = self.select_for_update().get(pk=instance_id)
            old_status = instance.status
            for name, value in fields.items():
                setattr(instance, name, value)
            if endpoints:
                instance.endpoints = endpoints
            if tags:
                instance.tags = tags
            instance.meta = {**(instance.meta or {}), **meta}
            if capabilities is not None:
                instance.capabilities = capabilities
            instance.last_seen_at = now
            instance.status = Status.ALIVE
            instance.save()
            if old_status != Status.ALIVE:
                self.model.record_change(instance_id, old_status, Status.ALIVE, "re-registered", now)
            return instance

    def ingest_snapshot(self, instance_id, snapshot, metadata, now):
        """Store the latest snapshot of an instance, normalised (SPEC 3.1)."""
        columns = normalise_snapshot(snapshot, metadata, now)
        # Encoded before the transaction: SQLite's write lock is held briefly.
        raw_json = orjson.dumps(columns["raw_resource"]).decode()
        with transaction.atomic():
            if not (touch_if_alive(self.model, instance_id, now) or self.touch(instance_id, now, "snapshot")):
                return IngestResult.UNKNOWN
            stored = upsert_latest_resource(
                self.model._meta.get_field("resource").related_model, instance_id, columns, raw_json
            )
        return IngestResult.STORED if stored else IngestResult.STALE

    # --- reads --------------------------------------------------------------

    def pool_totals(self, now, ttl_s):
        """The raw inputs of pool_resource as two SQL aggregates (SPEC 5).

        One over instances (counts and load), one over the resources of
        reporting instances only, so the wide resource rows are filtered by a
        WHERE once rather than by a FILTER clause per aggregate.
        """
        alive = Q(last_seen_at__gte=now - ttl_s)
        totals = self.aggregate(
            total=Count("pk"),
            alive=Count("pk", filter=alive),
            inflight_total=Sum("inflight", filter=alive),
            inflight_reported=Count("inflight", filter=alive),
            qps_1m_total=Sum("qps_1m", filter=alive),
            qps_1m_reported=Count("qps_1m", filter=alive),
        )
        resources = self.model._meta.get_field("resource").related_model.objects.filter(
            instance__last_seen_at__gte=now - ttl_s, resource_reported_at__isnull=False, has_raw_resource=True
        )
        totals.update(resources.aggregate(
            reporting=Count("pk"),
            accepting=Count("pk", filter=Q(admission_state="accepting")),
            degraded=Count("pk", filter=Q(admission_state="degraded")),
            rejecting=Count("pk", filter=Q(admission_state="rejecting")),
            cpu_avg=Avg("cpu_util"),
            cpu_max=Max("cpu_util"),
            memory_used_mb=Sum("memory_used_mb"),
            memory_total_mb=Sum("memory_total_mb"),
            memory_free_ratio_min=Min("memory_free_ratio"),
            gpu_util_avg=Avg("gpu_util_avg"),
            gpu_util_max=Max("gpu_util_max"),
            gpu_mem_used_mb=Sum("gpu_mem_used_mb"),
            gpu_mem_total_mb=Sum("gpu_mem_total_mb"),
            gpu_count_total=Sum("gpu_count"),
            network_rx_mbps_total=Sum("network_rx_mbps"),
            network_tx_mbps_total=Sum("network_tx_mbps"),
            reported_at_min=Min("resource_reported_at"),
            reported_at_avg=Avg("resource_reported_at"),
            reported_at_max=Max("resource_reported_at"),
        ))
        return totals


# Columns of the latest-resource upsert, in statement order.
UPSERT_COLUMNS = ("instance_id", *RESOURCE_FIELDS, "has_raw_resource", "raw_resource")


@functools.lru_cache(maxsize=8)
def _touch_sql(vendor, table_name):
    quote = connection.ops.quote_name
    return (
        f"UPDATE {quote(table_name)} SET {quote('last_seen_at')} = %s "
        f"WHERE {quote('instance_id')} = %s AND {quote('status')} = %s"
    )


def touch_if_alive(instance_model, instance_id, now):
    """The snapshot hot path of ``touch``: one prepared UPDATE, no ORM query building.

    False when the instance is unknown or not stored as alive; the caller then
    takes ``touch``, which revives it and records the change.
    """
    with connection.cursor() as cursor:
        cursor.execute(_touch_sql(connection.vendor, instance_model._meta.db_table), [now, instance_id, Status.ALIVE.value])
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


def upsert_latest_resource(resource_model, instance_id, columns, raw_json):
    """One INSERT … ON CONFLICT DO UPDATE of an instance's latest resource.

    The update is skipped for a late, reordered report: a lower ``report_seq``
    than the stored one, unless its wall time is newer (the agent restarted
    and its sequence began again). Returns False when skipped.
    """
    # normalise_snapshot yields plain floats, ints, strings and None, which
    # every driver takes as they are; the snapshot goes in as JSON text
    # (``raw_json``; orjson takes a tenth of the standard encoder's time).
    values = {
        **columns,
        "instance_id": instance_id,
        "raw_resource": raw_json,
        "has_raw_resource": bool(columns["raw_resource"]),
    }
    sql = _upsert_sql(connection.vendor, resource_model._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(sql, [values[name] for name in UPSERT_COLUMNS])
        return cursor.rowcount == 1

"""Domain operations on instances: register, heartbeat, ingest, sweep, aggregate.

Views call exactly one of these; each is cheap on the hot path (heartbeat and
snapshot ingest are one conditional UPDATE plus one upsert) and safe when two
processes run it at once.
"""

import enum

import orjson

from django.db import transaction
from django.db.models import Avg, Count, Max, Min, Q, Sum

from controlplane.managers import LivenessManager
from proxy_app import ingest_sql
from proxy_app.normalise import normalise_snapshot


class IngestResult(enum.Enum):
    STORED = "stored"
    STALE = "stale"  # an older report_seq than the stored one: not applied
    UNKNOWN = "unknown_instance"


class InstanceManager(LivenessManager):
    """Instances; touch, unregister, sweep and delete_expired come from LivenessManager."""

    # --- writes -------------------------------------------------------------

    def register(self, *, instance_id, host, port, endpoints, tags, weight, meta, capabilities, now):
        """Create or refresh an instance (SPEC 3 re-register rules)."""

        def refresh(instance):
            instance.host, instance.port, instance.weight = host, port, weight
            if endpoints:
                instance.endpoints = endpoints
            if tags:
                instance.tags = tags
            instance.meta = {**(instance.meta or {}), **meta}
            if capabilities is not None:
                instance.capabilities = capabilities

        return self.create_or_refresh(instance_id, now, {
            "host": host, "port": port, "weight": weight, "endpoints": endpoints, "tags": tags,
            "meta": meta, "capabilities": capabilities,
        }, refresh)

    def ingest_snapshot(self, instance_id, snapshot, metadata, now):
        """Store the latest snapshot of an instance, normalised (SPEC 3.1)."""
        columns = normalise_snapshot(snapshot, metadata, now)
        # Encoded before the transaction: SQLite's write lock is held briefly.
        raw_json = orjson.dumps(columns["raw_resource"]).decode()
        resource_model = self.model._meta.get_field("resource").related_model
        if ingest_sql.one_statement_supported():
            touched, stored = ingest_sql.touch_and_upsert(
                self.model, resource_model, instance_id, columns, raw_json, now
            )
            if touched:
                return IngestResult.STORED if stored else IngestResult.STALE
        with transaction.atomic():
            touched = ingest_sql.touch_if_alive(self.model, instance_id, now) or self.touch(
                instance_id, now, "snapshot"
            )
            if not touched:
                return IngestResult.UNKNOWN
            stored = ingest_sql.upsert_latest_resource(resource_model, instance_id, columns, raw_json)
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

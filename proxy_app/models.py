"""State of one pool: its instances, their latest resources, their status history."""

from django.conf import settings
from django.db import models

from controlplane.models import LivenessFields, StatusChangeBase
from proxy_app.managers import InstanceManager


class Instance(LivenessFields):
    """One LLM-serving process registered with this proxy (SPEC 3)."""

    instance_id = models.CharField(max_length=255, primary_key=True)
    host = models.CharField(max_length=255)
    port = models.PositiveIntegerField()
    endpoints = models.JSONField(default=list, blank=True)
    tags = models.JSONField(default=list, blank=True)
    weight = models.FloatField(default=1.0)
    meta = models.JSONField(default=dict, blank=True)
    capabilities = models.JSONField(null=True, blank=True)
    # Load from heartbeats; null until an instance reports it.
    inflight = models.BigIntegerField(null=True, blank=True)
    qps_1m = models.FloatField(null=True, blank=True)
    gpu_util = models.FloatField(null=True, blank=True)

    objects = InstanceManager()

    class Meta:
        ordering = ["instance_id"]
        indexes = [
            # The sweep walks entries by stored status and age.
            models.Index(fields=["status", "last_seen_at"], name="instance_status_seen"),
        ]

    def __str__(self):
        return self.instance_id

    @staticmethod
    def ttl_s():
        return settings.FLEETWATCH_INSTANCE_TTL_S

    @staticmethod
    def record_change(instance_id, old_status, new_status, reason, at):
        InstanceStatusChange.objects.create(
            instance_id=instance_id, old_status=old_status, new_status=new_status, reason=reason, at=at
        )


class InstanceResource(models.Model):
    """The latest snapshot of an instance, normalised into columns (SPEC 3.1).

    Real columns so pool_resource is a SQL aggregate; ``raw_resource`` keeps
    the snapshot exactly as sent.
    """

    instance = models.OneToOneField(
        Instance, primary_key=True, on_delete=models.CASCADE, related_name="resource"
    )
    cpu_util = models.FloatField(null=True, blank=True)
    memory_used_mb = models.FloatField(null=True, blank=True)
    memory_total_mb = models.FloatField(null=True, blank=True)
    memory_free_mb = models.FloatField(null=True, blank=True)
    memory_free_ratio = models.FloatField(null=True, blank=True)
    gpu_count = models.IntegerField(null=True, blank=True)
    gpu_util_avg = models.FloatField(null=True, blank=True)
    gpu_util_current = models.FloatField(null=True, blank=True)
    gpu_util_max = models.FloatField(null=True, blank=True)
    gpu_sample_count = models.BigIntegerField(null=True, blank=True)
    gpu_sample_age_ms = models.BigIntegerField(null=True, blank=True)
    gpu_sample_source = models.CharField(max_length=64, null=True, blank=True)
    gpu_sample_quality = models.CharField(max_length=32, null=True, blank=True)
    gpu_sample_window_ms = models.BigIntegerField(null=True, blank=True)
    gpu_mem_used_mb = models.FloatField(null=True, blank=True)
    gpu_mem_total_mb = models.FloatField(null=True, blank=True)
    network_rx_mbps = models.FloatField(null=True, blank=True)
    network_tx_mbps = models.FloatField(null=True, blank=True)
    admission_state = models.CharField(max_length=32, null=True, blank=True, db_index=True)
    resource_ts_ms = models.BigIntegerField(null=True, blank=True)
    resource_reported_at = models.FloatField(null=True, blank=True)
    resource_report_monotonic_ms = models.BigIntegerField(null=True, blank=True)
    resource_report_wall_time_ms = models.BigIntegerField(null=True, blank=True)
    reported_instance_id = models.CharField(max_length=255, null=True, blank=True)
    agent_snapshot_timestamp_ms = models.BigIntegerField(null=True, blank=True)
    report_seq = models.BigIntegerField(null=True, blank=True)
    # False when the snapshot was an empty object: such an instance is alive
    # but not "reporting" (SPEC 5), and SQL cannot test JSON emptiness portably.
    has_raw_resource = models.BooleanField(default=False)
    # Last on purpose: SQLite stores columns in this order, and a scan that
    # aggregates the columns above never has to step over the large JSON.
    raw_resource = models.JSONField(default=dict, blank=True)

    def __str__(self):
        return f"resource of {self.instance_id}"


class InstanceStatusChange(StatusChangeBase):
    """A liveness transition of an instance; kept after the instance is deleted."""

    instance_id = models.CharField(max_length=255, db_index=True)

    def __str__(self):
        return f"{self.instance_id}: {self.old_status or '-'} → {self.new_status}"


class SchedulerLinkState(models.Model):
    """Last outcome of this proxy's link to the scheduler (SPEC 7).

    The link runs in its own process; it writes this row after every attempt
    so ``/debug/status`` in the web processes can show it.
    """

    proxy_id = models.CharField(max_length=255, primary_key=True)
    scheduler_url = models.CharField(max_length=1024)
    registered = models.BooleanField(default=False)
    heartbeat_interval_s = models.FloatField(null=True, blank=True)
    last_action = models.CharField(max_length=32, blank=True, default="")
    last_attempt_at = models.FloatField(null=True, blank=True)
    last_ok_at = models.FloatField(null=True, blank=True)
    last_error_at = models.FloatField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    consecutive_failures = models.IntegerField(default=0)

    def as_dict(self):
        return {
            "proxy_id": self.proxy_id,
            "scheduler_url": self.scheduler_url,
            "registered": self.registered,
            "heartbeat_interval_s": self.heartbeat_interval_s,
            "last_action": self.last_action,
            "last_attempt_at": self.last_attempt_at,
            "last_ok_at": self.last_ok_at,
            "last_error_at": self.last_error_at,
            "last_error": self.last_error or None,
            "consecutive_failures": self.consecutive_failures,
        }

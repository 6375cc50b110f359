"""State of the fleet: every proxy, its latest pool summary and their histories."""

from django.conf import settings
from django.db import models

from controlplane.models import LivenessFields, StatusChangeBase
from scheduler_app.managers import PoolResourceSampleManager, ProxyManager
from scheduler_app.summary import ADMISSION_STATE_LENGTH, summary_columns

DEFAULT_ENDPOINTS = ("chat/completions", "completions")


def default_endpoints():
    return list(DEFAULT_ENDPOINTS)


class Proxy(LivenessFields):
    """The control plane of one pool of instances, registered with this scheduler (SPEC 6)."""

    proxy_id = models.CharField(max_length=255, primary_key=True)
    host = models.CharField(max_length=255)
    port = models.PositiveIntegerField()
    endpoints = models.JSONField(default=default_endpoints, blank=True)
    tags = models.JSONField(default=list, blank=True)
    weight = models.FloatField(default=1.0)
    meta = models.JSONField(default=dict, blank=True)
    # Static capacity the proxy declares on register.
    max_capacity = models.BigIntegerField(default=0)
    instance_count = models.BigIntegerField(default=0)
    kv_mem_per_instance_gb = models.FloatField(default=0.0)
    kv_cache_update_policy = models.CharField(max_length=64, default="lru")
    # Load from heartbeats; null until the proxy reports it.
    inflight = models.BigIntegerField(null=True, blank=True)
    qps_1m = models.FloatField(null=True, blank=True)
    gpu_util = models.FloatField(null=True, blank=True)
    # The latest pool summary exactly as sent, and when this scheduler got it.
    pool_resource = models.JSONField(null=True, blank=True)
    pool_resource_reported_at = models.FloatField(null=True, blank=True, help_text="Epoch seconds, receive time.")

    objects = ProxyManager()

    class Meta:
        verbose_name_plural = "proxies"
        ordering = ["-last_seen_at", "proxy_id"]
        indexes = [
            # The sweep walks entries by stored status and age.
            models.Index(fields=["status", "last_seen_at"], name="proxy_status_seen"),
        ]

    @staticmethod
    def ttl_s():
        return settings.FLEETWATCH_PROXY_TTL_S

    def __str__(self):
        return self.proxy_id

    @property
    def kv_cache_pool_gb(self):
        return float(self.instance_count) * float(self.kv_mem_per_instance_gb)

    @staticmethod
    def record_change(proxy_id, old_status, new_status, reason, at):
        ProxyStatusChange.objects.create(
            proxy_id=proxy_id, old_status=old_status, new_status=new_status, reason=reason, at=at
        )

    @staticmethod
    def record_summary(proxy_id, pool_resource, at):
        PoolResourceSample.objects.create(
            proxy_id=proxy_id, received_at=at, pool_resource=pool_resource, **summary_columns(pool_resource)
        )


class PoolResourceSample(models.Model):
    """One pool summary as received, kept for the trend charts (bounded by age).

    ``proxy_id`` is a plain column, not a foreign key: the history of a proxy
    that was unregistered or expired stays until it ages out, like its
    status changes. The chart figures are copied into columns at receive time
    so a chart reads columns, not JSON.
    """

    proxy_id = models.CharField(max_length=255)
    received_at = models.FloatField(db_index=True, help_text="Epoch seconds, scheduler receive time.")
    pool_resource = models.JSONField()
    instances_alive = models.BigIntegerField(null=True, blank=True)
    instances_total = models.BigIntegerField(null=True, blank=True)
    cpu_avg = models.FloatField(null=True, blank=True)
    gpu_util_avg = models.FloatField(null=True, blank=True)
    memory_used_ratio = models.FloatField(null=True, blank=True)
    pool_admission_state = models.CharField(max_length=ADMISSION_STATE_LENGTH, null=True, blank=True)

    objects = PoolResourceSampleManager()

    class Meta:
        ordering = ["-received_at", "-id"]
        indexes = [
            # Per-proxy charts; its prefix also serves lookups by proxy_id alone.
            models.Index(fields=["proxy_id", "received_at"], name="pool_sample_proxy_time"),
        ]

    def __str__(self):
        return f"{self.proxy_id} @ {self.received_at:.0f}"


class ProxyStatusChange(StatusChangeBase):
    """A liveness transition of a proxy; kept after the proxy is deleted."""

    proxy_id = models.CharField(max_length=255, db_index=True)

    def __str__(self):
        return f"{self.proxy_id}: {self.old_status or '-'} → {self.new_status}"

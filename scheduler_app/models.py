"""State of the fleet: every proxy, its latest pool summary and their histories."""

from django.conf import settings
from django.db import models

from controlplane.admission import Admission
from controlplane.models import NAME_LENGTH, RegisteredEndpoint, StatusChangeBase
from scheduler_app.managers import PoolResourceSampleManager, ProxyManager
from scheduler_app.summary import ADMISSION_STATE_LENGTH, summary_columns

DEFAULT_ENDPOINTS = ("chat/completions", "completions")


def default_endpoints():
    return list(DEFAULT_ENDPOINTS)


class ProxyStatusChange(StatusChangeBase):
    """A liveness transition of a proxy; kept after the proxy is deleted."""

    proxy_id = models.CharField(max_length=NAME_LENGTH, db_index=True)

    def __str__(self):
        return f"{self.proxy_id}: {self.old_status or '-'} → {self.new_status}"


class Proxy(RegisteredEndpoint):
    """The control plane of one pool of instances, registered with this scheduler (SPEC 6)."""

    proxy_id = models.CharField(max_length=NAME_LENGTH, primary_key=True)
    endpoints = models.JSONField(default=default_endpoints, blank=True)
    # Static capacity the proxy declares on register.
    max_capacity = models.BigIntegerField(default=0)
    instance_count = models.BigIntegerField(default=0)
    kv_mem_per_instance_gb = models.FloatField(default=0.0)
    kv_cache_update_policy = models.CharField(max_length=64, default="lru")
    # The latest pool summary exactly as sent, and when this scheduler got it.
    pool_resource = models.JSONField(null=True, blank=True)
    pool_resource_reported_at = models.FloatField(null=True, blank=True, help_text="Epoch seconds, receive time.")

    status_change_model = ProxyStatusChange
    ttl_setting = "FLEETWATCH_PROXY_TTL_S"

    objects = ProxyManager()

    class Meta:
        verbose_name_plural = "proxies"
        ordering = ["-last_seen_at", "proxy_id"]
        indexes = [
            # The sweep walks entries by stored status and age.
            models.Index(fields=["status", "last_seen_at"], name="proxy_status_seen"),
        ]

    @classmethod
    def heartbeat_interval_s(cls):
        """The interval proxies are told to heartbeat at (``FLEETWATCH_PROXY_HEARTBEAT_S``)."""
        return settings.FLEETWATCH_PROXY_HEARTBEAT_S

    @classmethod
    def heartbeat_interval_wire(cls):
        """The interval as answered on register: an int when integral.

        The original answered an int and its clients may parse it as one; a
        sub-second setting still goes out as the float it is.
        """
        interval = float(cls.heartbeat_interval_s())
        return int(interval) if interval.is_integer() else interval

    @property
    def kv_cache_pool_gb(self):
        return float(self.instance_count) * float(self.kv_mem_per_instance_gb)

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

    proxy_id = models.CharField(max_length=NAME_LENGTH)
    received_at = models.FloatField(db_index=True, help_text="Epoch seconds, scheduler receive time.")
    pool_resource = models.JSONField()
    instances_alive = models.BigIntegerField(null=True, blank=True)
    instances_total = models.BigIntegerField(null=True, blank=True)
    cpu_avg = models.FloatField(null=True, blank=True)
    gpu_util_avg = models.FloatField(null=True, blank=True)
    memory_used_ratio = models.FloatField(null=True, blank=True)
    pool_admission_state = models.CharField(
        max_length=ADMISSION_STATE_LENGTH, null=True, blank=True, choices=Admission.choices
    )

    objects = PoolResourceSampleManager()

    class Meta:
        ordering = ["-received_at", "-id"]
        indexes = [
            # Per-proxy charts; its prefix also serves lookups by proxy_id alone.
            models.Index(fields=["proxy_id", "received_at"], name="pool_sample_proxy_time"),
        ]

    def __str__(self):
        return f"{self.proxy_id} @ {self.received_at:.0f}"

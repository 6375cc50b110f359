"""State of the fleet: every proxy, its latest pool summary and their histories."""

from django.conf import settings
from django.db import models

from controlplane.endpoints.models import NAME_LENGTH, RegisteredEndpoint, status_change_model
from controlplane.series.models import PoolMinuteRollup, PoolSeriesPoint
from controlplane.series.pool_summary import summary_columns
from scheduler_app.managers import ProxyManager

DEFAULT_ENDPOINTS = ("chat/completions", "completions")


def default_endpoints():
    return list(DEFAULT_ENDPOINTS)


ProxyStatusChange = status_change_model("proxy", __name__)


def kv_cache_pool_gb(instance_count, kv_mem_per_instance_gb):
    """The KV cache a pool declares (``/v1/proxy/list``): its instances × each one's."""
    return float(instance_count) * float(kv_mem_per_instance_gb)


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
        return kv_cache_pool_gb(self.instance_count, self.kv_mem_per_instance_gb)

    @staticmethod
    def record_summary(proxy_id, pool_resource, at):
        PoolResourceSample.objects.create(proxy_id=proxy_id, t=at, summary=pool_resource, **summary_columns(pool_resource))


class PoolResourceSample(PoolSeriesPoint):
    """One pool summary as a proxy sent it, at full resolution (SPEC 6, 9).

    ``t`` is the scheduler's receive time. ``proxy_id`` is a plain column,
    not a foreign key: the series of a proxy that was unregistered or expired
    stays until it ages out, like its status changes.
    """

    proxy_id = models.CharField(max_length=NAME_LENGTH)

    class Meta(PoolSeriesPoint.Meta):
        indexes = [
            # Per-proxy series; its prefix also serves lookups by proxy_id alone.
            models.Index(fields=["proxy_id", "t"], name="pool_sample_proxy_time"),
        ]

    def __str__(self):
        return f"{self.proxy_id} @ {self.t:.0f}"


class ProxyPoolMinute(PoolMinuteRollup):
    """One minute of one proxy's summaries."""

    proxy_id = models.CharField(max_length=NAME_LENGTH)

    class Meta(PoolMinuteRollup.Meta):
        constraints = [models.UniqueConstraint(fields=["proxy_id", "minute"], name="proxy_pool_minute_once")]

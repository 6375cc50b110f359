"""The Scheduler's figures for ``/metrics`` (SPEC 11), read from the database at scrape time.

``fleetwatch_proxy_up`` for every registered Proxy, and for each one within
its TTL the figures of the pool_resource it last sent, as
``fleetwatch_fleet_pool_*{proxy_id}`` (``controlplane.ops.pool_metrics``; a
Proxy's own ``/metrics`` has the same figures as ``fleetwatch_pool_*``),
with the age of that summary.
"""

from prometheus_client.core import GaugeMetricFamily

from controlplane import clock
from controlplane.ops.pool_metrics import PoolFamilies
from scheduler_app.models import Proxy


def _gauge(name, documentation, labels=()):
    return GaugeMetricFamily(name, documentation, labels=list(labels))


class SchedulerCollector:
    def collect(self):
        now = clock.now()
        up = _gauge("fleetwatch_proxy_up", "1 while the proxy is within its TTL, else 0.", ["proxy_id"])
        age = _gauge("fleetwatch_fleet_pool_summary_age_seconds",
                     "Seconds since this Scheduler received the pool_resource of the proxy.", ["proxy_id"])
        pools = PoolFamilies("fleetwatch_fleet_pool_", _gauge, ["proxy_id"])
        rows = Proxy.objects.only("proxy_id", "last_seen_at", "pool_resource", "pool_resource_reported_at")
        for proxy in rows.iterator(chunk_size=200):
            alive = proxy.is_alive(now)
            up.add_metric([proxy.proxy_id], 1.0 if alive else 0.0)
            if not alive or not isinstance(proxy.pool_resource, dict):
                continue
            pools.add([proxy.proxy_id], proxy.pool_resource)
            if proxy.pool_resource_reported_at is not None:
                age.add_metric([proxy.proxy_id], max(0.0, now - proxy.pool_resource_reported_at))
        yield up
        yield age
        yield from pools.families()

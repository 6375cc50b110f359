"""The Scheduler's figures for ``/metrics`` (SPEC 11), read from the database at scrape time."""

from prometheus_client.core import GaugeMetricFamily

from controlplane import clock
from scheduler_app.models import Proxy


class SchedulerCollector:
    def collect(self):
        now = clock.now()
        up = GaugeMetricFamily("fleetwatch_proxy_up", "1 while the proxy is alive (seen within its TTL), else 0.",
                               labels=["proxy_id"])
        for proxy in Proxy.objects.only("proxy_id", "last_seen_at"):
            up.add_metric([proxy.proxy_id], 1.0 if proxy.is_alive(now) else 0.0)
        yield up

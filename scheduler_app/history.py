"""The Scheduler's series: each proxy's pool summaries over time (SPEC 9)."""

from controlplane.series.history import Series
from scheduler_app.models import PoolResourceSample, ProxyPoolMinute

PROXY_POOLS = Series(PoolResourceSample, ProxyPoolMinute, key="proxy_id")

"""Periodic tasks of the scheduler role (declared on ``SchedulerAppConfig``)."""

from django.conf import settings

from controlplane import clock
from scheduler_app.models import PoolResourceSample, Proxy, ProxyStatusChange


def sweep_proxies():
    """Record alive → suspect → stale transitions of proxies; returns how many."""
    return Proxy.objects.sweep(clock.now())


def delete_expired_proxies():
    """Delete proxies stale past the retention; returns how many."""
    return Proxy.objects.delete_expired(clock.now(), settings.FLEETWATCH_RETENTION_S)


def prune_pool_history():
    """Trim the pool-summary history and the proxies' status changes; returns rows deleted."""
    now = clock.now()
    samples = PoolResourceSample.objects.prune(now, settings.FLEETWATCH_POOL_HISTORY_S)
    changes = ProxyStatusChange.objects.prune(now, settings.FLEETWATCH_STATUS_HISTORY_S)
    return samples + changes

"""Periodic tasks of the scheduler role (declared on ``SchedulerAppConfig``)."""

from django.conf import settings

from controlplane import clock
from scheduler_app.history import PROXY_POOLS
from scheduler_app.models import Proxy, ProxyStatusChange


def sweep_proxies():
    """Record alive → suspect → stale transitions of proxies; returns how many."""
    return Proxy.objects.sweep(clock.now())


def delete_expired_proxies():
    """Delete proxies stale past the retention; returns how many."""
    return Proxy.objects.delete_expired(clock.now(), settings.FLEETWATCH_RETENTION_S)


def rollup_pool_history():
    """Fold each proxy's ended minutes of summaries into rollups; returns rollup rows written."""
    return PROXY_POOLS.fold(clock.now())


def prune_pool_history():
    """Delete summaries and rollups past their windows, and old status changes; returns rows deleted."""
    now = clock.now()
    return PROXY_POOLS.prune(now) + ProxyStatusChange.objects.prune(now, settings.FLEETWATCH_STATUS_HISTORY_S)

"""Periodic tasks of the proxy role (declared on ``ProxyAppConfig``)."""

from django.conf import settings

from controlplane import clock
from proxy_app.models import Instance, InstanceStatusChange
from proxy_app.ops.history import INSTANCES, POOL
from proxy_app.placement.fence_store import FenceSweeper


def sweep_instances():
    """Record alive → suspect → stale transitions; returns how many."""
    return Instance.objects.sweep(clock.now())


def sweep_fences():
    """One fence tick by a fresh sweeper (SPEC 14.2): the recorder's loop runs it every second; by hand,
    ``manage.py sweep_fences``. Returns how many fences went up or down."""
    return FenceSweeper().sweep(clock.now())


def delete_expired_instances():
    """Delete instances stale past the retention; returns how many."""
    return Instance.objects.delete_expired(clock.now(), settings.FLEETWATCH_RETENTION_S)


def rollup_instance_history():
    """Fold the ended minutes of the instance and pool series into rollups; returns rollup rows written."""
    now = clock.now()
    return INSTANCES.fold(now) + POOL.fold(now)


def prune_instance_history():
    """Delete series rows past their windows and status changes past theirs; returns rows deleted."""
    now = clock.now()
    series = INSTANCES.prune(now) + POOL.prune(now)
    return series + InstanceStatusChange.objects.prune(now, settings.FLEETWATCH_STATUS_HISTORY_S)

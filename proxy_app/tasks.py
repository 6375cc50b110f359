"""Periodic tasks of the proxy role (declared on ``ProxyAppConfig``)."""

from django.conf import settings

from controlplane import clock
from proxy_app.models import Instance, InstanceStatusChange


def sweep_instances():
    """Record alive → suspect → stale transitions; returns how many."""
    return Instance.objects.sweep(clock.now())


def delete_expired_instances():
    """Delete instances stale past the retention; returns how many."""
    return Instance.objects.delete_expired(clock.now(), settings.FLEETWATCH_RETENTION_S)


def prune_instance_history():
    """Delete status changes older than the status history window."""
    return InstanceStatusChange.objects.prune(clock.now(), settings.FLEETWATCH_STATUS_HISTORY_S)

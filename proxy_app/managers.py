"""Domain operations on one model each: registering instances, the link's record.

Operations that span the pool's models live in their own modules: snapshot
ingest in ``proxy_app.ingest``, the pool's aggregates in ``proxy_app.pool``.
"""

import logging

from django.db import models

from controlplane.managers import LivenessManager

log = logging.getLogger("fleetwatch.link")


class InstanceManager(LivenessManager):
    """Instances; touch, unregister, sweep and delete_expired come from LivenessManager."""

    def register(self, *, instance_id, host, port, endpoints, tags, weight, meta, capabilities, now):
        """Create or refresh an instance (SPEC 3 re-register rules)."""

        def refresh(instance):
            instance.host, instance.port, instance.weight = host, port, weight
            if endpoints:
                instance.endpoints = endpoints
            if tags:
                instance.tags = tags
            instance.meta = {**(instance.meta or {}), **meta}
            if capabilities is not None:
                instance.capabilities = capabilities

        return self.create_or_refresh(instance_id, now, {
            "host": host, "port": port, "weight": weight, "endpoints": endpoints, "tags": tags,
            "meta": meta, "capabilities": capabilities,
        }, refresh)


class SchedulerLinkStateManager(models.Manager):
    def record(self, proxy_id, fields):
        """Store the link's latest outcome; never raises (a locked or
        restarting database must not stop the link)."""
        try:
            self.update_or_create(proxy_id=proxy_id, defaults=fields)
        except Exception:
            log.exception("scheduler link: could not record the outcome")

    def status_of(self, proxy_id):
        """What ``/debug/status`` shows about the link (None when it never ran)."""
        state = self.filter(proxy_id=proxy_id).first()
        return state.as_dict() if state else None

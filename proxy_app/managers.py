"""Domain operations on one model each: registering instances, the link's record.

Operations that span the pool's models live in their own modules: snapshot
ingest in ``proxy_app.ingest.store``, the pool's aggregates in ``proxy_app.pool.summary``.
"""

import enum
import logging

from django.db import models

from agent.capabilities import fingerprint
from controlplane.db_outage import DATABASE_UNAVAILABLE
from controlplane.endpoints.liveness import ChangeReason
from controlplane.endpoints.managers import LivenessManager

log = logging.getLogger("fleetwatch.link")


# The error word of an answer about an instance this Proxy does not know (SPEC 3): re-register.
UNKNOWN_INSTANCE = "unknown_instance"


class Heartbeat(enum.Enum):
    """How an instance heartbeat ended (SPEC 3, 3.2)."""

    OK = "ok"
    UNKNOWN_INSTANCE = UNKNOWN_INSTANCE
    FINGERPRINT_UNKNOWN = "capability_fingerprint_unknown"  # nothing stored to compare with
    FINGERPRINT_MISMATCH = "capability_fingerprint_mismatch"


class InstanceManager(LivenessManager):
    """Instances; touch, unregister, sweep and delete_expired come from LivenessManager."""

    def register(self, *, instance_id, host, port, endpoints, tags, weight, meta, capabilities, now):
        """Create or refresh an instance (SPEC 3 re-register rules).

        ``capabilities`` (canonical, or None) replace the stored ones: a
        register without them clears them (SPEC 3.2).
        """
        capability_fields = {"capabilities": capabilities, "capability_fingerprint": fingerprint(capabilities)}

        def refresh(instance):
            instance.host, instance.port, instance.weight = host, port, weight
            if endpoints:
                instance.endpoints = endpoints
            if tags:
                instance.tags = tags
            instance.meta = {**(instance.meta or {}), **meta}
            instance.capabilities = capabilities
            instance.capability_fingerprint = capability_fields["capability_fingerprint"]

        return self.create_or_refresh(instance_id, now, {
            "host": host, "port": port, "weight": weight, "endpoints": endpoints, "tags": tags,
            "meta": meta, **capability_fields,
        }, refresh)

    def heartbeat(self, instance_id, now, load, capabilities=None, reported_fingerprint=None):
        """Refresh an instance and its load; returns ``(Heartbeat, stored fingerprint)``.

        With ``capabilities`` they replace the stored ones. With only a
        ``reported_fingerprint`` that differs from the stored one, nothing is
        refreshed (SPEC 3.2): the instance is told to send its capabilities.
        """
        fields = dict(load)
        if capabilities is not None:
            fields.update(capabilities=capabilities, capability_fingerprint=fingerprint(capabilities))
        elif reported_fingerprint is not None:
            # The common case, an alive instance whose fingerprint is the one reported: one UPDATE.
            if self.touch_alive(instance_id, now, fields, match={"capability_fingerprint": reported_fingerprint}):
                return Heartbeat.OK, None
            row = self.filter(pk=instance_id).values_list("capability_fingerprint", flat=True)
            stored = next(iter(row), False)
            if stored is False:
                return Heartbeat.UNKNOWN_INSTANCE, None
            if stored != reported_fingerprint:
                kind = Heartbeat.FINGERPRINT_MISMATCH if stored else Heartbeat.FINGERPRINT_UNKNOWN
                return kind, stored
        if not self.touch(instance_id, now, ChangeReason.HEARTBEAT, **fields):
            return Heartbeat.UNKNOWN_INSTANCE, None
        return Heartbeat.OK, None


class SchedulerLinkStateManager(models.Manager):
    def record(self, proxy_id, fields):
        """Store the link's latest outcome; raises only when the database is unavailable (the link
        waits that out), so no other error stops the link."""
        try:
            self.update_or_create(proxy_id=proxy_id, defaults=fields)
        except DATABASE_UNAVAILABLE:
            raise
        except Exception:
            log.exception("scheduler link: could not record the outcome")

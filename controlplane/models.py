"""Abstract model bases shared by both control planes."""

from django.db import models

from controlplane.liveness import Status
from controlplane.managers import HistoryManager


class StatusChangeBase(models.Model):
    """One liveness transition of an entry (healthchecks' ``Flip``)."""

    old_status = models.CharField(max_length=16, blank=True, default="")
    new_status = models.CharField(max_length=16)
    reason = models.CharField(max_length=255, blank=True, default="")
    at = models.FloatField(db_index=True, help_text="Epoch seconds of the change.")

    objects = HistoryManager()

    class Meta:
        abstract = True
        ordering = ["-at", "-id"]


class LivenessFields(models.Model):
    """Timestamps and the stored status of an entry that heartbeats.

    ``status`` is what the sweeper last recorded; reads compute liveness from
    ``last_seen_at`` (controlplane.liveness), so a late sweep never shows a
    dead entry as alive.
    """

    registered_at = models.FloatField(help_text="Epoch seconds.")
    last_seen_at = models.FloatField(db_index=True, help_text="Epoch seconds, server receive time.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ALIVE)

    class Meta:
        abstract = True

"""Admission states: may an instance, or a pool, take more work (SPEC 2.2, 5)."""

from django.db import models


class Admission(models.TextChoices):
    ACCEPTING = "accepting", "accepting"
    DEGRADED = "degraded", "degraded"
    REJECTING = "rejecting", "rejecting"

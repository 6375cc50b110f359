"""The model bases of a series (SPEC 9): full-resolution points and their minute rollups."""

from django.db import models

from controlplane.endpoints.admission import Admission


def minute_figures(names, kind=models.FloatField):
    """``<figure>_min``, ``_avg`` and ``_max`` columns of each figure, for a minute rollup model."""
    return {f"{name}_{agg}": kind(null=True, blank=True) for name in names for agg in ("min", "avg", "max")}


class PoolSeriesPoint(models.Model):
    """One pool summary at full resolution: the figures the charts draw, and the summary itself.

    ``t`` is epoch seconds like every time in this project; these rows live
    for the full-resolution window only (minutes), then survive as rollups.
    """

    t = models.FloatField(db_index=True, help_text="Epoch seconds.")
    alive = models.BigIntegerField(null=True, blank=True)
    total = models.BigIntegerField(null=True, blank=True)
    with_resource = models.BigIntegerField(null=True, blank=True)
    cpu_avg = models.FloatField(null=True, blank=True)
    memory_used_ratio = models.FloatField(null=True, blank=True)
    gpu_util_avg = models.FloatField(null=True, blank=True)
    gpu_mem_used_ratio = models.FloatField(null=True, blank=True)
    network_rx_mbps_total = models.FloatField(null=True, blank=True)
    network_tx_mbps_total = models.FloatField(null=True, blank=True)
    pool_admission_state = models.CharField(max_length=32, null=True, blank=True, choices=Admission.choices)
    summary = models.JSONField()

    FIGURES = ("alive", "total", "with_resource", "cpu_avg", "memory_used_ratio", "gpu_util_avg",
               "gpu_mem_used_ratio", "network_rx_mbps_total", "network_tx_mbps_total")
    ADMISSION = "pool_admission_state"

    class Meta:
        abstract = True
        ordering = ["-t"]


class MinuteRollup(models.Model):
    """One minute of a series folded into min/avg/max per figure (nulls ignored).

    ``minute`` is the minute's start; ``samples`` how many full-resolution
    rows it folded; the admission column holds the worst state of the minute.
    """

    minute = models.DateTimeField(db_index=True)
    samples = models.IntegerField()

    class Meta:
        abstract = True
        ordering = ["-minute"]


class PoolMinuteRollup(MinuteRollup):
    """A minute of a pool's summaries: ``alive_min``, ``alive_avg``, ``alive_max``, … per figure."""

    # A class body's namespace takes the generated columns like written-out ones.
    locals().update(minute_figures(PoolSeriesPoint.FIGURES))
    pool_admission_state = models.CharField(max_length=32, null=True, blank=True, choices=Admission.choices)

    FIGURES = PoolSeriesPoint.FIGURES
    ADMISSION = PoolSeriesPoint.ADMISSION

    class Meta(MinuteRollup.Meta):
        abstract = True

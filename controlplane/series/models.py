"""The model bases of a series (SPEC 9): full-resolution points and their minute rollups."""

from django.db import models

from controlplane.endpoints.admission import Admission


def figure(kind=models.FloatField, **options):
    """A reported figure's column: null where its input was (never 0 for unknown); ``options`` go to the field."""
    return kind(null=True, blank=True, **options)


def admission_column():
    """The admission state of a point; in a rollup, the worst of its minute."""
    return models.CharField(max_length=32, null=True, blank=True, choices=Admission.choices)


def rollup_columns(model):
    """Class decorator of a minute rollup: the ``<figure>_min``, ``_avg`` and ``_max`` columns of each of its
    ``FIGURES``, then its ``ADMISSION`` column, after the columns its class body declares."""
    for name in model.FIGURES:
        for part in ("min", "avg", "max"):
            model.add_to_class(f"{name}_{part}", figure())
    model.add_to_class(model.ADMISSION, admission_column())
    return model


class PoolSeriesPoint(models.Model):
    """One pool summary at full resolution: the figures the charts draw, and the summary itself.

    ``t`` is epoch seconds like every time in this project; these rows live
    for the full-resolution window only (minutes), then survive as rollups.
    """

    t = models.FloatField(db_index=True, help_text="Epoch seconds.")
    alive = figure(models.BigIntegerField)
    total = figure(models.BigIntegerField)
    with_resource = figure(models.BigIntegerField)
    cpu_avg = figure()
    memory_used_ratio = figure()
    gpu_util_avg = figure()
    gpu_mem_used_ratio = figure()
    network_rx_mbps_total = figure()
    network_tx_mbps_total = figure()
    # The serving engines' figures (SPEC 13, the summary's ``engine`` section).
    requests_waiting_total = figure()
    kv_cache_usage_max = figure()
    saturation = figure()
    pool_admission_state = admission_column()
    summary = models.JSONField()

    FIGURES = ("alive", "total", "with_resource", "cpu_avg", "memory_used_ratio", "gpu_util_avg",
               "gpu_mem_used_ratio", "network_rx_mbps_total", "network_tx_mbps_total",
               "requests_waiting_total", "kv_cache_usage_max", "saturation")
    ADMISSION = "pool_admission_state"

    class Meta:
        abstract = True
        ordering = ["-t"]


class MinuteRollup(models.Model):
    """One minute of a series folded into min/avg/max per figure (nulls ignored).

    ``minute`` is the minute's start; ``samples`` how many full-resolution
    rows it folded; each figure of the series has its ``<figure>_min``,
    ``_avg`` and ``_max`` columns (``rollup_columns``), and the admission
    column holds the worst state of the minute.
    """

    minute = models.DateTimeField(db_index=True)
    samples = models.IntegerField()

    class Meta:
        abstract = True
        ordering = ["-minute"]


@rollup_columns
class PoolMinuteRollup(MinuteRollup):
    """A minute of a pool's summaries: the min, mean and max of each figure of ``PoolSeriesPoint``."""

    FIGURES = PoolSeriesPoint.FIGURES
    ADMISSION = PoolSeriesPoint.ADMISSION

    class Meta(MinuteRollup.Meta):
        abstract = True

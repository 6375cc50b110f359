"""Series over time (SPEC 9): full resolution for a recent window, minute rollups beyond.

A ``Series`` pairs a full-resolution model (rows with an epoch-seconds ``t``)
with a minute-rollup model (``minute``, ``samples``, ``<figure>_min/_avg/_max``
and the worst admission state of the minute), optionally per key
(``instance_id``, ``proxy_id``). Steps:

1. Writers append full-resolution rows; nothing else happens on their path.
2. ``fold`` (a django-q2 task, every minute) folds each minute that has
   ended into one rollup row per key. It starts after the newest minute
   already folded, and a unique (key, minute) with conflicts ignored makes
   two folds at once, or a fold run twice, write each minute once. A minute
   is folded ``FOLD_GRACE_S`` after it ended, and never changes again.
3. ``prune`` deletes full-resolution rows past their window and rollups past
   theirs, in batches, so a large delete never holds a write lock for long.
4. ``read`` answers a range: full resolution when the range fits the
   full-resolution window, else minutes (folded ones, plus the minutes not
   folded yet, aggregated on the fly from full resolution), merged into
   wider buckets when a range would pass ``MAX_POINTS``. Two queries at
   most, whatever the number of points. Nulls stay null: an average ignores
   them, and a minute with no value at all has none.
"""

import math
from dataclasses import dataclass
from datetime import datetime, timezone

from django.conf import settings
from django.db.models import Avg, Case, Count, F, Func, IntegerField, Max, Min, Value, When

from controlplane.endpoints.admission import Admission
from controlplane.series.queries import raw_rows

RANGES = {"15m": 15 * 60, "1h": 3600, "6h": 6 * 3600, "24h": 24 * 3600}
MAX_POINTS = 1000
FOLD_GRACE_S = 5
PRUNE_BATCH = 5000
# The worse, the higher: a minute shows the worst state it saw.
ADMISSION_RANK = {Admission.ACCEPTING.value: 1, Admission.DEGRADED.value: 2, Admission.REJECTING.value: 3}
RANKED_ADMISSION = {rank: state for state, rank in ADMISSION_RANK.items()}
AGGREGATES = ("min", "avg", "max")


class EpochMinute(Func):
    """The minute number of an epoch-seconds column: floor(t / 60)."""

    template = "FLOOR(%(expressions)s / 60)"
    output_field = IntegerField()

    def as_sqlite(self, compiler, connection, **extra):
        # SQLite has no FLOOR of its own (Django would call back into Python
        # per row); a cast truncates, which is the floor for positive times.
        return self.as_sql(compiler, connection, template="CAST(%(expressions)s / 60 AS INTEGER)", **extra)


class EpochSeconds(Func):
    """A datetime column as integer epoch seconds, in SQL."""

    template = "CAST(EXTRACT(EPOCH FROM %(expressions)s) AS BIGINT)"
    output_field = IntegerField()

    def as_sqlite(self, compiler, connection, **extra):
        # %%%%s: one %% survives the template, the other the driver's placeholder pass.
        return self.as_sql(compiler, connection, template="CAST(strftime('%%%%s', %(expressions)s) AS INTEGER)",
                           **extra)


def as_datetime(epoch_s):
    return datetime.fromtimestamp(epoch_s, tz=timezone.utc)


def _worst_admission(column):
    return Max(Case(*(When(**{column: state}, then=Value(rank)) for state, rank in ADMISSION_RANK.items()),
                    output_field=IntegerField()))


@dataclass(frozen=True)
class Series:
    full: type
    minutes: type
    key: str | None = None

    @property
    def figures(self):
        return self.full.FIGURES

    @property
    def admission(self):
        return self.full.ADMISSION

    def _of(self, queryset, key_value):
        return queryset if self.key is None else queryset.filter(**{self.key: key_value})

    def _keys(self):
        return () if self.key is None else (self.key,)

    # --- folding ------------------------------------------------------------------

    def _minute_groups(self, start_s, end_s, key_value=None, keyed=False):
        """Minutes of full-resolution rows with ``start_s <= t < end_s``, aggregated in SQL."""
        rows = self.full.objects.filter(t__gte=start_s, t__lt=end_s)
        if keyed:
            rows = self._of(rows, key_value)
        aggregates = {"samples": Count("pk"), "worst": _worst_admission(self.admission)}
        for name in self.figures:
            aggregates.update({f"{name}_min": Min(name), f"{name}_avg": Avg(name), f"{name}_max": Max(name)})
        return (rows.annotate(minute_number=EpochMinute(F("t"))).values(*self._keys(), "minute_number")
                .annotate(**aggregates).order_by("minute_number"))

    def _rollup(self, group):
        fields = {name: group[name] for name in group if name not in ("minute_number", "worst")}
        fields[self.admission] = RANKED_ADMISSION.get(group["worst"])
        return self.minutes(minute=as_datetime(group["minute_number"] * 60), **fields)

    def fold(self, now):
        """Fold every ended, not yet folded minute into rollup rows; returns how many were written."""
        newest = self.minutes.objects.aggregate(newest=Max("minute"))["newest"]
        if newest:
            start = newest.timestamp() + 60
        else:  # the first fold: from the minute the full-resolution window begins in
            start = math.floor((now - settings.FLEETWATCH_HISTORY_FULL_S) / 60) * 60
        end = math.floor((now - FOLD_GRACE_S) / 60) * 60
        if start >= end:
            return 0
        rollups = [self._rollup(group) for group in self._minute_groups(start, end)]
        created = self.minutes.objects.bulk_create(rollups, ignore_conflicts=True, batch_size=500)
        return len(created)

    # --- pruning ------------------------------------------------------------------

    def prune(self, now):
        """Delete full-resolution rows and rollups past their windows; returns how many."""
        full_cut = now - settings.FLEETWATCH_HISTORY_FULL_S
        minute_cut = as_datetime(now - settings.FLEETWATCH_HISTORY_MINUTES_S)
        return (_delete_in_batches(self.full.objects.filter(t__lt=full_cut))
                + _delete_in_batches(self.minutes.objects.filter(minute__lt=minute_cut)))

    # --- reading ------------------------------------------------------------------

    def has(self, key_value):
        """Whether any point of ``key_value`` is stored."""
        return (self._of(self.full.objects, key_value).exists()
                or self._of(self.minutes.objects, key_value).exists())

    def last_point_at(self, key_value):
        """The epoch seconds of the newest point of ``key_value`` (a rollup's: the end of its minute), or None."""
        newest = self._of(self.full.objects, key_value).aggregate(newest=Max("t"))["newest"]
        if newest is not None:
            return newest
        minute = self._of(self.minutes.objects, key_value).aggregate(newest=Max("minute"))["newest"]
        return None if minute is None else minute.timestamp() + 60

    def read(self, key_value, range_name, now):
        """``(resolution_s, points)`` of one range, oldest first."""
        range_s = RANGES[range_name]
        since = now - range_s
        if range_s <= settings.FLEETWATCH_HISTORY_FULL_S:
            return self._read_full(key_value, since)
        return self._read_minutes(key_value, since, now, range_s)

    def _read_full(self, key_value, since):
        rows = self._of(self.full.objects.filter(t__gte=since), key_value).order_by("t")
        names = ("t", *self.figures, self.admission)
        points = [dict(zip(names, row)) for row in raw_rows(rows.values_list(*names))]
        if len(points) > MAX_POINTS:
            width = math.ceil(len(points) / MAX_POINTS)
            points = [self._merge(points[i:i + width]) for i in range(0, len(points), width)]
        return typical_step(points, settings.FLEETWATCH_SERIES_INTERVAL_S), points


    def _read_minutes(self, key_value, since, now, range_s):
        since_minute = math.floor(since / 60) * 60
        aggregates = [f"{name}_{agg}" for name in self.figures for agg in AGGREGATES]
        width = max(1, math.ceil(range_s / 60 / MAX_POINTS))
        # Folded minutes, merged into buckets of ``width`` minutes by the database:
        # (bucket start, worst rank, min/avg/max of each figure in figure order).
        folded = self._of(self.minutes.objects.filter(minute__gte=as_datetime(since_minute)), key_value)
        epoch = EpochSeconds(F("minute"))
        buckets = (folded.annotate(bucket=epoch / (60 * width)).values("bucket")
                   .annotate(last=Max(epoch), worst=_worst_admission(self.admission), **{
                       f"{name}_{agg}": {"min": Min, "avg": Avg, "max": Max}[agg](f"{name}_{agg}")
                       for name in self.figures for agg in AGGREGATES})
                   .values_list("bucket", "last", "worst", *aggregates).order_by("bucket"))
        minutes, newest = [], None
        for bucket, newest, worst, *values in raw_rows(buckets):
            minutes.append((float(bucket * 60 * width), worst, values))
        # Minutes not folded yet come straight from full resolution.
        live_from = newest + 60 if newest is not None else since_minute
        live = [(group["minute_number"] * 60.0, group["worst"], tuple(group[name] for name in aggregates))
                for group in self._minute_groups(live_from, now + 1, key_value, keyed=True)]
        if live:
            # The newest bucket may hold folded and live minutes alike.
            tail = [m for m in minutes if m[0] >= math.floor(live[0][0] / (60 * width)) * 60 * width]
            minutes = minutes[:len(minutes) - len(tail)] + _merge_minutes(tail + live, width)
        return 60 * width, [self._minute_point(*minute) for minute in minutes]

    def _minute_point(self, t, rank, aggregates):
        point = {"t": t}
        low, high = {}, {}
        for i, name in enumerate(self.figures):
            low[name], point[name], high[name] = aggregates[3 * i:3 * i + 3]
        point[self.admission] = RANKED_ADMISSION.get(rank)
        point["min"], point["max"] = low, high
        return point

    def _merge(self, points):
        """Several full-resolution points as one: the averages, the worst state."""
        merged = {"t": points[0]["t"]}
        for name in self.figures:
            values = [p[name] for p in points if p[name] is not None]
            merged[name] = sum(values) / len(values) if values else None
        ranks = [ADMISSION_RANK[p[self.admission]] for p in points if p[self.admission] in ADMISSION_RANK]
        merged[self.admission] = RANKED_ADMISSION[max(ranks)] if ranks else None
        return merged


def typical_step(points, fallback):
    """The seconds between the points as they lie: the median gap of consecutive ``t``.

    Full-resolution rows come as often as they were written (the recorder's
    tick, or each heartbeat of a proxy), so the configured tick is only the
    answer for fewer than two points. The median ignores a gap where a
    writer paused.
    """
    gaps = sorted(b["t"] - a["t"] for a, b in zip(points, points[1:]))
    if not gaps:
        return float(fallback)
    middle = len(gaps) // 2
    median = gaps[middle] if len(gaps) % 2 else (gaps[middle - 1] + gaps[middle]) / 2
    return round(float(median), 3)


def _merge_minutes(minutes, width):
    """Consecutive minutes as buckets of ``width`` minutes: min of minima, mean of averages, max of maxima."""
    buckets = {}
    for t, rank, aggregates in minutes:
        buckets.setdefault(math.floor(t / (60 * width)), []).append((rank, aggregates))
    merged = []
    for bucket, members in sorted(buckets.items()):
        ranks = [rank for rank, _ in members if rank is not None]
        columns = list(zip(*(aggregates for _, aggregates in members)))
        combined = []
        for i in range(0, len(columns), 3):
            lows, means, highs = ([v for v in column if v is not None] for column in columns[i:i + 3])
            combined += [min(lows) if lows else None, sum(means) / len(means) if means else None,
                         max(highs) if highs else None]
        merged.append((float(bucket * 60 * width), max(ranks) if ranks else None, tuple(combined)))
    return merged


def _delete_in_batches(queryset, batch=PRUNE_BATCH):
    """DELETE the rows of ``queryset`` a batch at a time (short write locks on SQLite)."""
    deleted = 0
    while True:
        ids = list(queryset.values_list("pk", flat=True)[:batch])
        if not ids:
            return deleted
        deleted += queryset.model.objects.filter(pk__in=ids).delete()[0]
        if len(ids) < batch:
            return deleted

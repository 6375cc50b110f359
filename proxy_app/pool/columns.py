"""The pool summary's inputs, kept per web process (SPEC 5, 13): a columnar copy of the pool.

Aggregating the pool in SQL costs a scan and ~35 aggregate functions over
every instance on each read (12 ms at 10,000 instances on SQLite). Instead
each process keeps the figures the summary reads in numpy columns, one slot
per instance, and brings them up to date on every read from the rows whose
contact changed since its last one (``controlplane.endpoints.boards.BoardKeeper``:
an index range of ``last_seen_at``, with an overlap for writes committed
late, and the unregistered ones dropped). Every register, heartbeat and
report stamps the contact with the clock of its arrival, which moves
between any two of them, so a contact other than the one held means a row
to read again: a read sees every report committed before it, as the SQL
did; the sums then take a few vector operations.

``PoolColumns.totals`` answers what SQL aggregates over the rows would:
counts as ints, a sum, average, minimum or maximum over no value is
``None``, and the ``alive`` cut-off is ``last_seen_at >= now - ttl``.
"""

import numpy as np
import orjson
from django.conf import settings
from django.db import connection

from controlplane.endpoints import liveness
from controlplane.endpoints.admission import Admission
from controlplane.endpoints.boards import BoardKeeper
from controlplane.endpoints.slots import Column, SlotColumns
from proxy_app.ingest.engines import saturation
from proxy_app.models import Instance

# Each column of the board, as (column name on the board, field read).
CONTACT = (("last_seen_at", "last_seen_at"), ("inflight", "inflight"), ("qps_1m", "qps_1m"))
FIGURES = (
    "resource_reported_at", "cpu_util", "memory_used_mb", "memory_total_mb", "memory_free_ratio",
    "gpu_util_avg", "gpu_util_max", "gpu_mem_used_mb", "gpu_mem_total_mb", "gpu_count",
    "network_rx_mbps", "network_tx_mbps", "engine_count", "engine_ok_count", "requests_running",
    "requests_waiting", "kv_cache_usage_ratio", "kv_cache_capacity_tokens", "ttft_p95_s",
)
NUMERIC = (*CONTACT, *((name, f"resource__{name}") for name in FIGURES))
COLUMN = {name: index for index, (name, _) in enumerate(NUMERIC)}
# A row is a tuple of these, as the driver answers it: the id, the numbers, then the rest.
FIELDS = ("instance_id", *(field for _, field in NUMERIC), "resource__has_raw_resource",
          "resource__admission_state", "resource__engine_models")
END = 1 + len(NUMERIC)
ADMISSION = {state: code for code, state in enumerate(Admission.values)}


class PoolColumns:
    """The pool, one slot per instance (``SlotColumns``): float figures (NaN for null) and the codes of the rest."""

    def __init__(self, capacity):
        self.columns = SlotColumns({
            "values": Column(float, np.nan, rows=len(NUMERIC)), "used": Column(bool, False),
            "reporting": Column(bool, False),  # sent a non-empty snapshot, stamped
            "admission": Column(np.int8, -1), "models": Column(np.int32, -1),  # models: index into model_sets
        }, capacity)
        self.model_sets = []
        self._model_codes = {}

    def __len__(self):
        return len(self.columns)

    def put_rows(self, rows):
        """Store rows of ``FIELDS`` (tuples), each replacing what its instance's slot held."""
        if not rows:
            return
        if len(self.model_sets) > 4 * max(64, len(self.columns)):
            self._forget_model_sets()
        c = self.columns
        slots = np.fromiter((c.slot(row[0])[0] for row in rows), dtype=np.intp, count=len(rows))
        c.values[:, slots] = np.array([row[1:END] for row in rows], dtype=float).T
        c.used[slots] = True
        c.reporting[slots] = np.array([bool(row[END]) for row in rows]) & ~np.isnan(
            c.values[COLUMN["resource_reported_at"], slots])
        c.admission[slots] = [ADMISSION.get(row[-2], -1) for row in rows]
        c.models[slots] = [self._model_code(row[-1]) for row in rows]

    def last_seen(self, instance_id):
        slot = self.columns.slot_of.get(instance_id)
        return None if slot is None else float(self.columns.values[COLUMN["last_seen_at"], slot])

    def remove(self, instance_id):
        self.columns.remove(instance_id)

    def _model_code(self, text):
        """The code of an engine model set (its JSON text as stored, grouped as SQL's GROUP BY would)."""
        if text is None:
            return -1
        code = self._model_codes.get(text)
        if code is None:
            code = self._model_codes[text] = len(self.model_sets)
            self.model_sets.append(orjson.loads(text))
        return code

    def _forget_model_sets(self):
        """Renumber the model sets in use, dropping those no slot holds any more."""
        held = np.unique(self.columns.models[self.columns.used & (self.columns.models >= 0)])
        self.model_sets = [self.model_sets[code] for code in held]
        texts = {code: text for text, code in self._model_codes.items()}
        self._model_codes = {texts[old]: new for new, old in enumerate(held)}
        renumbered = np.full(self.columns.models.size, -1, dtype=np.int32)
        mask = self.columns.used & (self.columns.models >= 0)
        renumbered[mask] = np.searchsorted(held, self.columns.models[mask])
        self.columns.models = renumbered

    def totals(self, now, ttl_s, waiting_scale, kv_scale):
        """The raw inputs of pool_resource (``proxy_app.pool.answers``: every key a column it reads).

        Each aggregate runs over the non-null values of its column in the rows it is over: one mask
        for the whole table, then one pass per kind of reduction over every column at once.
        """
        values = self.columns.values
        alive = self.columns.used & liveness.alive_mask(values[COLUMN["last_seen_at"]], now, ttl_s)
        reporting = alive & self.columns.reporting
        present = ~np.isnan(values)
        totals = {"total": len(self.columns), "alive": int(np.count_nonzero(alive))}
        for name in ("inflight", "qps_1m"):
            counted = present[COLUMN[name]] & alive
            totals[f"{name}_reported"] = int(np.count_nonzero(counted))
            totals[f"{name}_total"] = float(values[COLUMN[name]][counted].sum()) if counted.any() else None
        totals["reporting"] = int(np.count_nonzero(reporting))
        codes = self.columns.admission[reporting]
        totals.update({state: int(np.count_nonzero(codes == code)) for state, code in ADMISSION.items()})

        counted = present & reporting
        counts = np.count_nonzero(counted, axis=1)
        sums = np.add.reduce(values, axis=1, where=counted, initial=0.0)
        reduced = {"sum": sums, "avg": sums / np.maximum(counts, 1),
                   "min": np.minimum.reduce(values, axis=1, where=counted, initial=np.inf),
                   "max": np.maximum.reduce(values, axis=1, where=counted, initial=-np.inf)}
        for alias, kind, name in AGGREGATES:
            index = COLUMN[name]
            totals[alias] = float(reduced[kind][index]) if counts[index] else None

        with_engine = reporting & (np.nan_to_num(values[COLUMN["engine_count"]]) > 0)
        engine_ok = reporting & (np.nan_to_num(values[COLUMN["engine_ok_count"]]) > 0)
        totals["instances_with_engine"] = int(np.count_nonzero(with_engine))
        totals["instances_engine_ok"] = int(np.count_nonzero(engine_ok))
        totals["saturation"] = _saturation(values, present, engine_ok, waiting_scale, kv_scale)
        totals["engine_model_groups"] = self._model_groups(reporting) if totals["instances_with_engine"] else []
        return totals

    def _model_groups(self, reporting):
        """(models, instances, requests waiting) per distinct model set of the reporting instances, by models."""
        held = reporting & (self.columns.models >= 0)
        codes, waiting = self.columns.models[held], self.columns.values[COLUMN["requests_waiting"]][held]
        queued = ~np.isnan(waiting)
        instances = np.bincount(codes)
        queues = np.bincount(codes[queued], weights=waiting[queued], minlength=instances.size)
        reported = np.bincount(codes[queued], minlength=instances.size)
        return sorted((list(self.model_sets[code]), int(instances[code]),
                       float(queues[code]) if reported[code] else None) for code in np.flatnonzero(instances))


# (alias, reduction, column) over the reporting instances' non-null values; the aliases are
# columns the pool summary's declaration reads (``proxy_app.pool.answers``).
AGGREGATES = (
    ("cpu_avg", "avg", "cpu_util"), ("cpu_max", "max", "cpu_util"),
    ("memory_used_mb", "sum", "memory_used_mb"), ("memory_total_mb", "sum", "memory_total_mb"),
    ("memory_free_ratio_min", "min", "memory_free_ratio"),
    ("gpu_util_avg", "avg", "gpu_util_avg"), ("gpu_util_max", "max", "gpu_util_max"),
    ("gpu_mem_used_mb", "sum", "gpu_mem_used_mb"), ("gpu_mem_total_mb", "sum", "gpu_mem_total_mb"),
    ("gpu_count_total", "sum", "gpu_count"),
    ("network_rx_mbps_total", "sum", "network_rx_mbps"), ("network_tx_mbps_total", "sum", "network_tx_mbps"),
    ("reported_at_min", "min", "resource_reported_at"), ("reported_at_avg", "avg", "resource_reported_at"),
    ("reported_at_max", "max", "resource_reported_at"),
    ("requests_running_total", "sum", "requests_running"), ("requests_waiting_total", "sum", "requests_waiting"),
    ("kv_cache_usage_avg", "avg", "kv_cache_usage_ratio"), ("kv_cache_usage_max", "max", "kv_cache_usage_ratio"),
    ("kv_cache_capacity_tokens_total", "sum", "kv_cache_capacity_tokens"),
    ("ttft_p95_max_s", "max", "ttft_p95_s"),
)


def _saturation(values, present, engine_ok, waiting_scale, kv_scale):
    """The average instance saturation (SPEC 13): min(1, max(waiting / W, kv usage / K)) over the
    instances with an ok engine and either signal."""
    waiting, usage = COLUMN["requests_waiting"], COLUMN["kv_cache_usage_ratio"]
    signal = engine_ok & (present[waiting] | present[usage])
    if not signal.any():
        return None
    return float(saturation(values[waiting][signal], values[usage][signal], waiting_scale, kv_scale).mean())


class PoolColumnsKeeper(BoardKeeper):
    """This process's ``PoolColumns`` (``LEDGER``): brought up to date on every read, never throttled."""

    model = Instance
    fields = FIELDS
    throttled = False

    def new_board(self, capacity):
        return PoolColumns(capacity)

    # Beyond this many changed rows, one range read is cheaper than looking them up by id.
    MAX_LOOKUPS = 1000

    def read(self, queryset):
        """Tuples of ``FIELDS`` straight from the driver: the JSON of the model sets stays text, decoded
        once per distinct set (reading a whole pool of 10,000 through ``values()`` cost twice as much)."""
        sql, params = queryset.values_list(*FIELDS).query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()

    def key_of(self, row):
        return row[0]

    def changed_rows(self, since):
        """The rows whose contact is not the one held: the overlap's contacts are read from the index
        alone (``last_seen_at``, ``instance_id``), and only the rows that moved are read whole."""
        contacts = Instance.objects.filter(last_seen_at__gt=since).order_by().values_list("instance_id", "last_seen_at")
        moved = [instance_id for instance_id, seen in contacts if self.board.last_seen(instance_id) != seen]
        if not moved:
            return []
        rows = Instance.objects.order_by()
        rows = rows.filter(last_seen_at__gt=since) if len(moved) > self.MAX_LOOKUPS else rows.filter(pk__in=moved)
        return self.read(rows)

    def fill(self, board, rows, old_board):
        board.put_rows(rows)

    def totals(self, now):
        with self._lock:
            self._refresh(now)
            return self.board.totals(now, Instance.ttl_s(), float(settings.FLEETWATCH_SATURATION_WAITING),
                                     float(settings.FLEETWATCH_SATURATION_KV))


LEDGER = PoolColumnsKeeper()

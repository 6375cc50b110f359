"""The Proxy's instance lists, built from database rows (SPEC 3: ``/v1/instance/list``,
``/debug/instance_resources``).

A full list of 10,000 instances is 31 MB of JSON, most of it the stored
snapshots, and what it costs is Python objects: ~580,000 values from the
driver, 30,000 dicts, and the memory they take. So:

- the rows come straight from the driver (no model instances, no
  converters; binary on PostgreSQL, ``raw_row_batches``), and every JSON
  column (the snapshot, endpoints, tags, meta, a resource's model and LoRA
  lists) as the text it is stored as, ``null`` or ``{}`` in place of SQL
  NULL, so that each goes into the answer as an ``orjson.Fragment``, never
  decoded and encoded again, without a test per row;
- a row is built in one pass: its resource dict is a presized copy filled
  from the fetched row, and what most of a fleet shares (the fence verdict,
  the capabilities' full view) is worked out once per distinct input;
- the answer is read, built and encoded ``BATCH_ROWS`` rows at a time into one
  buffer, so each batch reuses the few megabytes the one before freed. Built
  whole, the list's ~100 MB of short-lived objects were fresh pages on every
  request, never in cache: a granian worker took 26,000 page faults a list,
  now 14,500 (the answer itself, and the server's copy of it).

Only capabilities are parsed: list rows show them with every field present
(SPEC 3.2).
"""

import contextlib
import gc
import io

import orjson
from django.db.models import F, Func, TextField

from agent.capabilities import full_view
from controlplane.endpoints import liveness
from controlplane.series.queries import as_text, raw_row_batches, raw_rows
from proxy_app.ingest.normalise import RESOURCE_FIELDS
from proxy_app.models import Instance
from proxy_app.placement.fence_store import effective_fence

Fragment = orjson.Fragment
EMPTY_OBJECT = Fragment(b"{}")
# Rows read, built and encoded at a time: a few megabytes, reused batch after batch (10,000
# instances on SQLite, CPU in process: 117 ms in batches of 50 or 200, 141 ms of 1,000, 163 ms whole).
BATCH_ROWS = 200
# The resource's columns that hold JSON text.
RESOURCE_JSON_FIELDS = ("engine_models", "engine_loras")
# A list row's columns, in the order ``_ListRows`` reads them: the resource's first (in RESOURCE_FIELDS
# order, so that they fill a row's resource dict as they come; nulls before the first snapshot), then
# the instance's, then ``raw_text``.
INSTANCE_COLUMNS = (
    "instance_id", "host", "port", "endpoints_text", "tags_text", "weight", "meta_text", "capabilities_text",
    "capability_fingerprint", "registered_at", "last_seen_at", "inflight", "qps_1m", "gpu_util",
    "fenced", "fence_reason", "had_ok_engine",
)
COLUMNS = (
    *(f"{name}_text" if name in RESOURCE_JSON_FIELDS else f"resource__{name}" for name in RESOURCE_FIELDS),
    *INSTANCE_COLUMNS,
)
# Where the instance's columns begin in a row of COLUMNS, and where some of the resource's are.
INSTANCE_AT = len(RESOURCE_FIELDS)
ENGINE_COUNT, ENGINE_OK_COUNT, ENGINE_STATUS, ENGINE_MODELS, ENGINE_LORAS, GPU_ERROR_COUNT = map(
    RESOURCE_FIELDS.index,
    ("engine_count", "engine_ok_count", "engine_status", "engine_models", "engine_loras", "gpu_error_count"))
# A row's resource: every key in the answer's order, the values filled in from the fetched row.
RESOURCE_TEMPLATE = dict.fromkeys((*RESOURCE_FIELDS, "raw_resource"))


def _fragment(text):
    return None if text is None else Fragment(text)


def _with_text_columns(queryset, raw):
    """``queryset`` with the JSON columns of COLUMNS as text (and the snapshot as ``raw_text`` with ``raw``)."""
    columns = {
        "endpoints_text": as_text("endpoints", null="null"), "tags_text": as_text("tags", null="null"),
        "meta_text": as_text("meta", null="null"), "capabilities_text": as_text("capabilities"),
        **{f"{name}_text": as_text(f"resource__{name}", null="null") for name in RESOURCE_JSON_FIELDS},
    }
    if raw:
        columns["raw_text"] = _SnapshotText()
    return queryset.annotate(**columns)


class _SnapshotText(Func):
    """The snapshot as stored; ``{}`` before the first one, also where one is left without its resource row."""

    output_field = TextField()

    def __init__(self):
        super().__init__(F("resource__instance_id"), as_text("snapshot__raw_resource", null="{}"))

    def as_sql(self, compiler, connection, **extra_context):
        (resource_id, resource_params), (snapshot, snapshot_params) = map(compiler.compile, self.source_expressions)
        return f"CASE WHEN {resource_id} IS NULL THEN '{{}}' ELSE {snapshot} END", (*resource_params, *snapshot_params)


def instance_rows(queryset, now):
    """Rows of ``/v1/instance/list`` for the instances of ``queryset``, in its order."""
    return [row for batch in _row_batches(queryset, now) for row in batch]


def instance_list_json(queryset, now):
    """``instance_rows`` encoded (JSON ``bytes``), a batch at a time, with the cyclic garbage collector
    paused: the rows are tens of thousands of new containers, none in a cycle, and the collections they
    set off in a web process (scanning its whole heap) took a quarter of the list's time."""
    answer, separator = io.BytesIO(), b"["
    with _collector_paused():
        for rows in _row_batches(queryset, now):
            answer.write(separator)
            answer.write(memoryview(orjson.dumps(rows))[1:-1])  # the batch's rows, without [ ]
            separator = b","
    answer.write(b"]" if separator == b"," else b"[]")
    return answer.getvalue()


def _row_batches(queryset, now):
    """The list rows of ``queryset``, BATCH_ROWS at a time, from one query."""
    rows = _ListRows(now)
    query = _with_text_columns(queryset, raw=True).values_list(*COLUMNS, "raw_text")
    for fetched in raw_row_batches(query, BATCH_ROWS):
        yield rows.build(fetched)


@contextlib.contextmanager
def _collector_paused():
    if not gc.isenabled():  # paused by a caller: theirs to resume
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class _ListRows:
    """Builds list rows from fetched rows (COLUMNS, then ``raw_text``) at one ``now``.

    Per row only what differs between rows is computed: the fence verdict
    and the capabilities' full view are pure functions of a few values that
    most of a fleet shares, so each distinct input is worked out once per
    list, whatever the batch.
    """

    def __init__(self, now):
        self.status_of = liveness.status_reader(now, Instance.ttl_s(), Instance.heartbeat_interval_s())
        self.fences = _Memo(effective_fence)
        self.views = {}

    def build(self, fetched):
        status_of, fences, views = self.status_of, self.fences, self.views
        rows = []
        for row in fetched:
            (instance_id, host, port, endpoints, tags, weight, meta, capabilities, fingerprint, registered_at,
             last_seen_at, inflight, qps_1m, gpu_util, fenced, fence_reason, had_ok_engine, raw) = row[INSTANCE_AT:]
            resource = RESOURCE_TEMPLATE.copy()  # presized and in order: cheaper than a dict built up
            resource.update(zip(RESOURCE_FIELDS, row))
            resource["engine_models"] = Fragment(row[ENGINE_MODELS])
            resource["engine_loras"] = Fragment(row[ENGINE_LORAS])
            resource["raw_resource"] = Fragment(raw)
            fenced, fence_reason = fences[fenced, fence_reason, had_ok_engine, row[ENGINE_COUNT], row[ENGINE_OK_COUNT],
                                          row[ENGINE_STATUS], row[GPU_ERROR_COUNT]]
            status, alive = status_of(last_seen_at)
            rows.append({
                "instance_id": instance_id,
                "host": host,
                "port": port,
                "endpoints": Fragment(endpoints),
                "tags": Fragment(tags),
                "weight": weight,
                "meta": Fragment(meta),
                "registered_at": registered_at,
                "last_seen_at": last_seen_at,
                "status": status,
                "is_alive": alive,
                "capabilities": (views.get(fingerprint) or _capabilities_view(views, capabilities, fingerprint))
                if capabilities else None,
                "capability_fingerprint": fingerprint,
                "load": {"inflight": inflight, "qps_1m": qps_1m, "gpu_util": gpu_util},
                "fenced": fenced,
                "fence_reason": fence_reason,
                "resource": resource,
            })
        return rows


class _Memo(dict):
    """``function(*inputs)`` by its inputs (a tuple), worked out on the first lookup of each."""

    def __init__(self, function):
        super().__init__()
        self.function = function

    def __missing__(self, inputs):
        value = self[inputs] = self.function(*inputs)
        return value


def _capabilities_view(views, capabilities, fingerprint):
    """The full view of stored capabilities (SPEC 3.2) as JSON, shared by the rows of one fingerprint."""
    if fingerprint is None:
        return full_view(orjson.loads(capabilities))
    view = views[fingerprint] = Fragment(orjson.dumps(full_view(orjson.loads(capabilities))))
    return view


def resource_rows(queryset, now):
    """Rows of ``/debug/instance_resources``: the resource without the raw snapshot."""
    ttl_s = Instance.ttl_s()
    columns = ("instance_id", "host", "port", "last_seen_at", "resource__instance_id",
               *(f"resource__{name}" for name in RESOURCE_FIELDS))
    rows = []
    for instance_id, host, port, last_seen_at, resource_id, *resource in raw_rows(queryset.values_list(*columns)):
        row = _resource(resource_id, resource, None)
        row.pop("raw_resource")
        rows.append({"instance_id": instance_id, "host": host, "port": port, "last_seen_at": last_seen_at,
                     "is_alive": liveness.is_alive(last_seen_at, now, ttl_s), "resource": row})
    return rows


def _resource(resource_id, values, raw):
    """The SPEC 3.1 fields (nulls before the first snapshot) and the snapshot as stored."""
    if resource_id is None:
        return {**dict.fromkeys(RESOURCE_FIELDS), "raw_resource": EMPTY_OBJECT}
    row = dict(zip(RESOURCE_FIELDS, values))
    # JSON text, spliced in like the snapshot.
    row["engine_models"] = _fragment(row["engine_models"])
    row["engine_loras"] = _fragment(row["engine_loras"])
    row["raw_resource"] = _fragment(raw) or EMPTY_OBJECT
    return row

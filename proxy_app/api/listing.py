"""The Proxy's instance lists, built from database rows (SPEC 3: ``/v1/instance/list``,
``/debug/instance_resources``, ``/debug/instance_loads``).

Each row's keys, and where each value comes from, are declared once, in the
serializer the schema publishes (``proxy_app/api/openapi/rows.py``); its
``RowShape`` (``controlplane/api/rows.py``) gives the query's columns and the
builder. What this module adds is how a list is read and written, and the
functions the declarations name (liveness, the fence, the capabilities' view).

A full list of 10,000 instances is 31 MB of JSON, most of it the stored
snapshots, and what it costs is Python objects: ~580,000 values from the
driver, 30,000 dicts, and the memory they take. So:

- the rows come straight from the driver (no model instances, no
  converters; binary on PostgreSQL, ``raw_row_batches``), and every JSON
  column (the snapshot, endpoints, tags, meta, a resource's model and LoRA
  lists) as the text it is stored as, ``null`` or ``{}`` in place of SQL
  NULL, so that each goes into the answer as an ``orjson.Fragment``, never
  decoded and encoded again, without a test per row;
- a row is built in one pass (one dict display; its resource dict a presized
  copy zipped with the fetched row), and what most of a fleet shares (the
  fence verdict, the capabilities' full view) is worked out once per
  distinct input;
- the answer is read, built and encoded ``BATCH_ROWS`` rows at a time into one
  buffer, so each batch reuses the few megabytes the one before freed. Built
  whole, the list's ~100 MB of short-lived objects were fresh pages on every
  request, never in cache: a granian worker took 26,000 page faults a list,
  now 14,500 (the answer itself, and the server's copy of it).

Only capabilities are parsed: list rows show them with every field present
(SPEC 3.2).
"""

import contextlib
import functools
import gc
import io

import orjson

from agent.capabilities import full_view
from controlplane.api.rows import RowShape
from controlplane.endpoints import liveness
from controlplane.series.queries import raw_row_batches, raw_rows
from proxy_app.api.openapi.rows import InstanceLoadRow, InstanceResourceRow, InstanceRow
from proxy_app.models import Instance
from proxy_app.placement.fence_store import effective_fence

# Rows read, built and encoded at a time: a few megabytes, reused batch after batch (10,000
# instances on SQLite, CPU in process: 117 ms in batches of 50 or 200, 141 ms of 1,000, 163 ms whole).
BATCH_ROWS = 200
# Each answer's row, compiled once from the serializer the schema publishes.
LIST_ROW, RESOURCE_ROW, LOAD_ROW = RowShape(InstanceRow), RowShape(InstanceResourceRow), RowShape(InstanceLoadRow)


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
    build = list_builder(now)
    for fetched in raw_row_batches(LIST_ROW.query(queryset), BATCH_ROWS):
        yield build(fetched)


def list_builder(now):
    """``build(fetched)``: list rows of fetched ``LIST_ROW`` columns at ``now``. What most of a fleet shares
    is worked out once per builder, whatever the batch: the fence verdict of each distinct input (a
    pure function of a few values), and the capabilities' full view of each fingerprint."""
    return LIST_ROW.builder(status_of=_status_reader(now), fence=functools.lru_cache(maxsize=None)(effective_fence),
                            capabilities=_capability_views())


def resource_rows(queryset, now):
    """Rows of ``/debug/instance_resources``: the resource without the raw snapshot."""
    return RESOURCE_ROW.builder(status_of=_status_reader(now))(raw_rows(RESOURCE_ROW.query(queryset)))


def load_rows(queryset, now):
    """Rows of ``/debug/instance_loads``: the heartbeat's load, the original's queue keys as null (no queue
    manager here) and its least-load score."""
    return LOAD_ROW.builder(status_of=_status_reader(now))(raw_rows(LOAD_ROW.query(queryset)))


def _status_reader(now):
    return liveness.status_reader(now, Instance.ttl_s(), Instance.heartbeat_interval_s())


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


def _capability_views():
    """``view(capabilities, fingerprint)``: the full view of stored capabilities (SPEC 3.2), as JSON shared
    by the rows of one fingerprint; capabilities without a fingerprint are viewed row by row. A closure,
    not a callable object: a row's call costs less."""
    views = {}

    def view(capabilities, fingerprint):
        if not capabilities:
            return None
        found = views.get(fingerprint)
        if found is None:
            if fingerprint is None:
                return full_view(orjson.loads(capabilities))
            found = views[fingerprint] = orjson.Fragment(orjson.dumps(full_view(orjson.loads(capabilities))))
        return found

    return view

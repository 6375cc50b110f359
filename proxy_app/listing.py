"""The Proxy's instance lists, built from database rows (SPEC 3: ``/v1/instance/list``,
``/debug/instance_resources``).

A full list of 10,000 instances is 31 MB of JSON, most of it the stored
snapshots, and its cost is Python values: the driver makes ~570,000 of them
and the rows hold 30,000 dicts. So the rows come straight from the driver
(no model instances, no converters), the database hands every JSON column
(the snapshot, endpoints, tags, meta, a resource's model and LoRA lists) as
the text it is stored as, with ``null`` or ``{}`` in place of SQL NULL, so
each goes into the answer as an ``orjson.Fragment`` without a test per row;
and a row is one pass with no function call that a dict lookup can replace.
Only capabilities are parsed: list rows show them with every field present
(SPEC 3.2).
"""

import contextlib
import gc

import orjson
from django.db.models import Case, F, IntegerField, TextField, Value, When
from django.db.models.functions import Cast, Coalesce

from agent.capabilities import full_view
from controlplane.endpoints import liveness
from controlplane.series.queries import as_text, raw_rows
from proxy_app.fences import effective_fence
from proxy_app.models import Instance
from proxy_app.normalise import RESOURCE_FIELDS

Fragment = orjson.Fragment
EMPTY_OBJECT = Fragment(b"{}")
# The resource's columns that hold JSON text.
RESOURCE_JSON_FIELDS = ("engine_models", "engine_loras")
# A list row's columns, in the order ``instance_rows`` reads them: the instance's, then its
# resource's in RESOURCE_FIELDS order (nulls before the first snapshot), then ``raw_text``.
COLUMNS = (
    "instance_id", "host", "port", "endpoints_text", "tags_text", "weight", "meta_text", "capabilities_text",
    "capability_fingerprint", "registered_at", "last_seen_at", "inflight", "qps_1m", "gpu_util",
    "fenced_flag", "fence_reason", "had_ok_engine_flag",
    *(f"{name}_text" if name in RESOURCE_JSON_FIELDS else f"resource__{name}" for name in RESOURCE_FIELDS),
)
# Where the resource columns begin in a row of COLUMNS.
RESOURCE_AT = COLUMNS.index("resource__cpu_util")
# A row's resource: every key in place (the answer's order), filled from the fetched row.
RESOURCE_KEYS = (*RESOURCE_FIELDS, "raw_resource")
RESOURCE_TEMPLATE = dict.fromkeys(RESOURCE_KEYS)


def _fragment(text):
    return None if text is None else Fragment(text)


def _json_text(field, null):
    """A JSON column as its text, ``null`` (JSON text too) where it is SQL NULL: a Fragment on every row."""
    return Coalesce(as_text(field), Value(null), output_field=TextField())


def _with_text_columns(queryset, raw):
    """``queryset`` with the computed columns of COLUMNS (and the snapshot as ``raw_text`` with ``raw``)."""
    columns = {
        "endpoints_text": _json_text("endpoints", "null"), "tags_text": _json_text("tags", "null"),
        "meta_text": _json_text("meta", "null"), "capabilities_text": as_text("capabilities"),
        **{f"{name}_text": _json_text(f"resource__{name}", "null") for name in RESOURCE_JSON_FIELDS},
        # Plain integers: SQLite's driver would call a converter for each boolean.
        "fenced_flag": Cast(F("fenced"), IntegerField()), "had_ok_engine_flag": Cast(F("had_ok_engine"), IntegerField()),
    }
    if raw:
        # {} before the first snapshot, also where a snapshot is left without its resource row.
        columns["raw_text"] = Case(When(resource__isnull=True, then=Value("{}")),
                                   default=_json_text("snapshot__raw_resource", "{}"), output_field=TextField())
    return queryset.annotate(**columns)


def instance_rows(queryset, now):
    """Rows of ``/v1/instance/list`` for the instances of ``queryset``, in its order.

    Per row only what differs between rows is computed: the fence verdict
    and the capabilities' full view are pure functions of a few values that
    most of a fleet shares, so each distinct input is worked out once per
    list.
    """
    status_of = liveness.status_reader(now, Instance.ttl_s(), Instance.heartbeat_interval_s())
    fence_of, views = _OncePerInput(effective_fence), {}
    rows = []
    for row in raw_rows(_with_text_columns(queryset, raw=True).values_list(*COLUMNS, "raw_text")):
        (instance_id, host, port, endpoints, tags, weight, meta, capabilities, fingerprint, registered_at,
         last_seen_at, inflight, qps_1m, gpu_util, fenced, fence_reason, had_ok_engine) = row[:RESOURCE_AT]
        resource = RESOURCE_TEMPLATE.copy()  # presized, in order: cheaper than a dict built up
        resource.update(zip(RESOURCE_KEYS, row[RESOURCE_AT:]))
        resource["engine_models"] = Fragment(resource["engine_models"])
        resource["engine_loras"] = Fragment(resource["engine_loras"])
        resource["raw_resource"] = Fragment(resource["raw_resource"])
        fenced, fence_reason = fence_of[fenced, fence_reason, had_ok_engine, resource["engine_count"],
                                        resource["engine_ok_count"], resource["engine_status"],
                                        resource["gpu_error_count"]]
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


def instance_list_json(queryset, now):
    """``instance_rows`` encoded (JSON ``bytes``), read, built and encoded with the cyclic garbage
    collector paused: 10,000 rows are tens of thousands of new containers, none in a cycle, and the
    collections they set off in a web process (scanning its whole heap) took a quarter of the list's time."""
    with _collector_paused():
        return orjson.dumps(instance_rows(queryset, now))


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


class _OncePerInput(dict):
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

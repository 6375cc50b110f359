"""The Proxy's instance lists, built from database rows (SPEC 3: ``/v1/instance/list``,
``/debug/instance_resources``).

A full list of 10,000 instances is 26 MB of JSON, nearly all of it the
stored snapshots. The rows come straight from the driver (no model
instances, no converters), and every JSON column (the snapshot, endpoints,
tags, meta) goes into the answer as the text it is stored as
(``orjson.Fragment``), never decoded and encoded again. Only capabilities
are parsed: list rows show them with every field present (SPEC 3.2).
"""

import contextlib
import gc

import orjson

from agent.capabilities import full_view
from controlplane.endpoints import liveness
from controlplane.series.queries import as_text, raw_rows
from proxy_app.fences import effective_fence
from proxy_app.models import Instance
from proxy_app.normalise import RESOURCE_FIELDS

EMPTY_OBJECT = orjson.Fragment(b"{}")
COLUMNS = (
    "instance_id", "host", "port", "endpoints_text", "tags_text", "weight", "meta_text", "capabilities_text",
    "capability_fingerprint", "registered_at", "last_seen_at", "inflight", "qps_1m", "gpu_util",
    "fenced", "fence_reason", "had_ok_engine", "resource__instance_id", *(f"resource__{name}" for name in RESOURCE_FIELDS),
)
# Where the resource columns begin in a row of COLUMNS.
RESOURCE_AT = COLUMNS.index("resource__instance_id") + 1


def _fragment(text):
    return None if text is None else orjson.Fragment(text)


def _with_text_columns(queryset, raw):
    texts = {"endpoints_text": as_text("endpoints"), "tags_text": as_text("tags"), "meta_text": as_text("meta"),
             "capabilities_text": as_text("capabilities")}
    if raw:
        texts["raw_text"] = as_text("snapshot__raw_resource")
    return queryset.annotate(**texts)


def instance_rows(queryset, now):
    """Rows of ``/v1/instance/list`` for the instances of ``queryset``, in its order.

    Per row only what differs between rows is computed: the fence verdict
    and the capabilities' full view are pure functions of a few values that
    most of a fleet shares, so each distinct input is worked out once per
    list.
    """
    status_of = liveness.status_reader(now, Instance.ttl_s(), Instance.heartbeat_interval_s())
    fences, views = {}, {}
    fetched = raw_rows(_with_text_columns(queryset, raw=True).values_list(*COLUMNS, "raw_text"))
    return [_instance_row(row, status_of, fences, views) for row in fetched]


def instance_list_json(queryset, now):
    """``instance_rows`` encoded (``orjson.Fragment``), read, built and encoded with the cyclic garbage
    collector paused: 10,000 rows are tens of thousands of new containers, none in a cycle, and the
    collections they set off in a web process (scanning its whole heap) took a quarter of the list's time."""
    with _collector_paused():
        return orjson.Fragment(orjson.dumps(instance_rows(queryset, now)))


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


def _instance_row(row, status_of, fences, views):
    """One row of the list from one fetched row."""
    (instance_id, host, port, endpoints, tags, weight, meta, capabilities, fingerprint, registered_at,
     last_seen_at, inflight, qps_1m, gpu_util, fenced, fence_reason, had_ok_engine, resource_id) = row[:RESOURCE_AT]
    resource = _resource(resource_id, row[RESOURCE_AT:-1], row[-1])
    fence_inputs = (bool(fenced), fence_reason, bool(had_ok_engine), resource["engine_count"],
                    resource["engine_ok_count"], resource["engine_status"], resource["gpu_error_count"])
    fence = fences.get(fence_inputs)
    if fence is None:
        fence = fences[fence_inputs] = effective_fence(*fence_inputs)
    status, alive = status_of(last_seen_at)
    return {
        "instance_id": instance_id,
        "host": host,
        "port": port,
        "endpoints": _fragment(endpoints),
        "tags": _fragment(tags),
        "weight": weight,
        "meta": _fragment(meta),
        "registered_at": registered_at,
        "last_seen_at": last_seen_at,
        "status": status,
        "is_alive": alive,
        "capabilities": _capabilities_view(views, capabilities, fingerprint),
        "capability_fingerprint": fingerprint,
        "load": {"inflight": inflight, "qps_1m": qps_1m, "gpu_util": gpu_util},
        "fenced": fence[0],
        "fence_reason": fence[1],
        "resource": resource,
    }


def _capabilities_view(views, capabilities, fingerprint):
    """The full view of stored capabilities (SPEC 3.2) as JSON, shared by the rows of one fingerprint."""
    if not capabilities:
        return None
    if fingerprint is None:
        return full_view(orjson.loads(capabilities))
    view = views.get(fingerprint)
    if view is None:
        view = views[fingerprint] = orjson.Fragment(orjson.dumps(full_view(orjson.loads(capabilities))))
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

"""GET /v1/instance/list answers byte for byte what it answered before it was made cheaper (issue 23).

``old_rows`` is the list as ``proxy_app/api/listing.py`` built it up to then,
kept here as the reference: one query through the ORM, one dict per row,
each value worked out row by row with the domain functions themselves
(``liveness.status_at``, ``effective_fence``, ``full_view``), the JSON
columns spliced in as stored. The fleet below has one instance of each kind
a list shows: never reported, reporting with GPUs and engines, an empty
snapshot, a resource without its snapshot and a snapshot without its resource, fenced by the router, by an
engine that went down and by a GPU error, stale and suspect, capabilities
shared, and capabilities without a fingerprint. Runs on SQLite and on
PostgreSQL (where the stored JSON text is PostgreSQL's own, spaces and all).
"""

import orjson
import pytest

from agent.capabilities import full_view
from controlplane.endpoints import liveness
from controlplane.series.queries import as_text, raw_rows
from proxy_app.api import listing
from proxy_app.api.listing import instance_rows
from proxy_app.ingest.normalise import RESOURCE_FIELDS
from proxy_app.models import Instance, InstanceResource, InstanceSnapshot
from proxy_app.placement.fence_store import effective_fence
from tests.factories import T0, make_capabilities, make_engine, make_failed_engine, make_gpu, make_snapshot

pytestmark = pytest.mark.django_db

OLD_COLUMNS = (
    "instance_id", "host", "port", "endpoints_text", "tags_text", "weight", "meta_text", "capabilities_text",
    "capability_fingerprint", "registered_at", "last_seen_at", "inflight", "qps_1m", "gpu_util",
    "fenced", "fence_reason", "had_ok_engine", "resource__instance_id",
    *(f"resource__{name}" for name in RESOURCE_FIELDS), "raw_text",
)


def old_rows(queryset, now):
    """The rows of the list as they were built before (the reference for the bytes)."""
    texts = {f"{name}_text": as_text(name) for name in ("endpoints", "tags", "meta", "capabilities")}
    fetched = raw_rows(queryset.annotate(**texts, raw_text=as_text("snapshot__raw_resource")).values_list(*OLD_COLUMNS))
    return [_old_row(row, now) for row in fetched]


def _old_row(row, now):
    (instance_id, host, port, endpoints, tags, weight, meta, capabilities, fingerprint, registered_at,
     last_seen_at, inflight, qps_1m, gpu_util, fenced, fence_reason, had_ok_engine, resource_id) = row[:18]
    if resource_id is None:
        resource = {**dict.fromkeys(RESOURCE_FIELDS), "raw_resource": orjson.Fragment(b"{}")}
    else:
        resource = dict(zip(RESOURCE_FIELDS, row[18:-1]))
        resource["engine_models"] = _fragment(resource["engine_models"])
        resource["engine_loras"] = _fragment(resource["engine_loras"])
        resource["raw_resource"] = _fragment(row[-1]) or orjson.Fragment(b"{}")
    fenced, fence_reason = effective_fence(
        bool(fenced), fence_reason, bool(had_ok_engine), resource["engine_count"], resource["engine_ok_count"],
        resource["engine_status"], resource["gpu_error_count"])
    status = liveness.status_at(last_seen_at, now, Instance.ttl_s(), Instance.heartbeat_interval_s())
    return {
        "instance_id": instance_id, "host": host, "port": port, "endpoints": _fragment(endpoints),
        "tags": _fragment(tags), "weight": weight, "meta": _fragment(meta), "registered_at": registered_at,
        "last_seen_at": last_seen_at, "status": status.value,
        "is_alive": liveness.is_alive(last_seen_at, now, Instance.ttl_s()),
        "capabilities": full_view(orjson.loads(capabilities)) if capabilities else None,
        "capability_fingerprint": fingerprint,
        "load": {"inflight": inflight, "qps_1m": qps_1m, "gpu_util": gpu_util},
        "fenced": fenced, "fence_reason": fence_reason, "resource": resource,
    }


def _fragment(text):
    return None if text is None else orjson.Fragment(text)


def old_json(queryset):
    return orjson.dumps(old_rows(queryset, T0 + 31))


@pytest.fixture
def fleet(api, register_instance, report, instance_heartbeat, frozen):
    """One instance of each kind, listed at T0 + 31 s."""
    register_instance("i-stale", weight=100.0)
    frozen.shift(15)
    register_instance("i-suspect", port=1)
    frozen.shift(16)
    register_instance("i-bare", host="10.0.0.9", port=65535, weight=100.0)
    register_instance("i-full", endpoints=["/v1", "/v1/chat"], tags=["a", "é,\"b\""], weight=0.1 + 0.2,
                      meta={"m": 1, "nested": {"x": [1.5, None, 1e16, 1e-7]}, "ünï": "\u2028"},
                      capabilities=make_capabilities())
    instance_heartbeat("i-full", inflight=3, qps_1m=2.5, gpu_util=77.0)
    report("i-full", make_snapshot(gpus=[make_gpu(0), make_gpu(1, avg=100.0, used=79999.5)], engines=[
        make_engine(), make_engine(engine_index="1", model="other", kv_cache_usage_ratio=0.1 + 0.2)]), seq=7)
    register_instance("i-twin", capabilities=make_capabilities())
    assert api.post("/v1/instance/resource_snapshot", {"instance_id": "i-twin", "snapshot": {},
                                                      "metadata": {"report_seq": 1}}).json() == {"ok": True}
    register_instance("i-down")
    report("i-down", make_snapshot(engines=[make_engine()]), seq=1)
    report("i-down", make_snapshot(engines=[make_failed_engine("timeout")]), seq=2)
    Instance.objects.filter(pk="i-down").update(had_ok_engine=True)  # as the recorder's sweep would have
    register_instance("i-gpu-error")
    report("i-gpu-error", make_snapshot(gpus=[make_gpu(0, health="error")]))
    register_instance("i-fenced")
    Instance.objects.filter(pk="i-fenced").update(fenced=True, fence_reason="router_errors")
    register_instance("i-unsnapped")
    report("i-unsnapped", seq=3)
    InstanceSnapshot.objects.filter(pk="i-unsnapped").delete()
    register_instance("i-unresourced")
    report("i-unresourced")
    InstanceResource.objects.filter(pk="i-unresourced").delete()
    register_instance("i-unfingerprinted", capabilities=make_capabilities(schema_version="2"))
    Instance.objects.filter(pk="i-unfingerprinted").update(capability_fingerprint=None)


@pytest.fixture(params=[1, 4, 11, 200], ids=lambda rows: f"batches of {rows}")
def batches(request, monkeypatch):
    """The answer encoded a batch at a time: one row each, batches that leave a remainder, one whole batch."""
    monkeypatch.setattr(listing, "BATCH_ROWS", request.param)


def test_it_answers_the_full_list_byte_for_byte_as_before(api, fleet, batches):
    response = api.get("/v1/instance/list", include_dead="true")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.content == old_json(Instance.objects.all())
    rows = {row["instance_id"]: row for row in response.json()}
    # The fleet has every kind it is meant to have.
    assert len(rows) == 11
    assert {row["status"] for row in rows.values()} == {"alive", "suspect", "stale"}
    assert {row["fence_reason"] for row in rows.values() if row["fenced"]} == {"router_errors", "engine_timeout", "gpu_error"}
    assert rows["i-twin"]["resource"]["raw_resource"] == rows["i-unsnapped"]["resource"]["raw_resource"] == {}
    assert rows["i-unsnapped"]["resource"]["report_seq"] is not None
    assert rows["i-unresourced"]["resource"]["raw_resource"] == {}
    assert rows["i-full"]["resource"]["engine_models"] == ["other", "tiny"]
    assert rows["i-full"]["capabilities"] == rows["i-twin"]["capabilities"] is not None
    assert rows["i-unfingerprinted"]["capabilities"] is not None


def test_it_answers_the_alive_list_byte_for_byte_as_before(api, fleet, batches):
    assert api.get("/v1/instance/list").content == old_json(Instance.objects.alive(T0 + 31))


def test_it_answers_a_page_byte_for_byte_as_before(api, fleet, batches):
    page = Instance.objects.filter(pk__in=["i-full", "i-gpu-error", "i-stale"])
    expected = orjson.dumps({"count": 11, "limit": 3, "offset": 3, "results": old_rows(page, T0 + 31)})
    assert api.get("/v1/instance/list", include_dead="true", limit=3, offset=3).content == expected


def test_its_rows_are_the_rows_built_as_before(fleet):
    """What the instance page shows as its list row comes from the same rows."""
    assert orjson.dumps(instance_rows(Instance.objects.all(), T0 + 31)) == old_json(Instance.objects.all())


def test_it_writes_a_row_without_a_report_as_it_always_has(api, register_instance, frozen):
    register_instance("i-1", host="10.0.0.1", port=8000, weight=100.0)
    resource = ",".join(f'"{name}":null' for name in RESOURCE_FIELDS)
    assert api.get("/v1/instance/list").content == (
        b'[{"instance_id":"i-1","host":"10.0.0.1","port":8000,"endpoints":[],"tags":[],"weight":100.0,"meta":{},'
        b'"registered_at":1767225600.0,"last_seen_at":1767225600.0,"status":"alive","is_alive":true,'
        b'"capabilities":null,"capability_fingerprint":null,"load":{"inflight":null,"qps_1m":null,"gpu_util":null},'
        b'"fenced":false,"fence_reason":null,"resource":{' + resource.encode() + b',"raw_resource":{}}}]'
    )


def test_it_answers_an_empty_pool_as_before(api, frozen, batches):
    assert api.get("/v1/instance/list").content == b"[]"

"""Bad input on every POST endpoint (SPEC 1, issue 2 "Bad input").

Each rejected request answers 4xx with ``{"ok": false, "error", "detail"}``,
writes nothing and never answers 500.
"""

import json

import pytest
from django.forms.models import model_to_dict

from proxy_app.models import Instance, InstanceResource, InstanceStatusChange
from tests.factories import make_snapshot

pytestmark = [pytest.mark.django_db, pytest.mark.both_entry_points]

REGISTER = "/v1/instance/register"
HEARTBEAT = "/v1/instance/heartbeat"
SNAPSHOT = "/v1/instance/resource_snapshot"
UNREGISTER = "/v1/instance/unregister"

VALID = {
    REGISTER: {"instance_id": "i-1", "host": "10.0.0.9", "port": 9000, "weight": 3.0, "meta": {"new": 1}},
    HEARTBEAT: {"instance_id": "i-1", "inflight": 7, "qps_1m": 7.0, "gpu_util": 70.0},
    SNAPSHOT: {"instance_id": "i-1", "snapshot": make_snapshot(cpu=77.0), "metadata": {"report_seq": 9}},
    UNREGISTER: {"instance_id": "i-1"},
}
POST_ENDPOINTS = list(VALID)


def body(path, **changes):
    """The valid body of ``path`` with fields changed (a value of ``...`` drops the field)."""
    result = json.loads(json.dumps(VALID[path]))
    for name, value in changes.items():
        if value is ...:
            result.pop(name, None)
        else:
            result[name] = value
    return json.dumps(result)


def literal(path, field, text, inside=None):
    """The valid body with ``field`` (or ``snapshot[inside]``) set to raw JSON ``text``."""
    marker = "__LITERAL__"
    data = json.loads(json.dumps(VALID[path]))
    if inside:
        data[inside][field] = marker
    else:
        data[field] = marker
    return json.dumps(data).replace(json.dumps(marker), text)


# Every endpoint: (case id, raw body)
COMMON = [
    ("malformed json", lambda p: '{"instance_id": "i-1",'),
    ("not json at all", lambda p: "instance_id=i-1"),
    ("empty body", lambda p: ""),
    ("json array", lambda p: json.dumps([VALID[p]])),
    ("empty json array", lambda p: "[]"),
    ("json string", lambda p: json.dumps("i-1")),
    ("json number", lambda p: "42"),
    ("json null", lambda p: "null"),
    ("instance_id int", lambda p: body(p, instance_id=123)),
    ("instance_id list", lambda p: body(p, instance_id=["i-1"])),
    ("instance_id object", lambda p: body(p, instance_id={"id": "i-1"})),
    ("instance_id bool", lambda p: body(p, instance_id=True)),
    ("instance_id too long", lambda p: body(p, instance_id="i" * 256)),
    ("instance_id with nul", lambda p: body(p, instance_id="i-\u00001")),
    ("NaN literal", lambda p: literal(p, "extra", "NaN")),
    ("Infinity literal", lambda p: literal(p, "extra", "Infinity")),
    ("-Infinity literal", lambda p: literal(p, "extra", "-Infinity")),
    ("1e400", lambda p: literal(p, "extra", "1e400")),
    ("nul in an unknown field", lambda p: body(p, extra="a\u0000b")),
    ("nul in a key", lambda p: body(p, **{"ex\u0000tra": 1})),
    ("lone surrogate in instance_id", lambda p: literal(p, "instance_id", '"i-\\ud800"')),
    ("lone surrogate in an unknown field", lambda p: literal(p, "extra", '"a\\udfffb"')),
    ("lone surrogate in a key", lambda p: literal(p, "extra", '{"k\\ud800": 1}')),
    ("nested past the recursion limit", lambda p: literal(p, "extra", "[" * 5000 + "]" * 5000)),
    ("nested past the depth limit", lambda p: literal(p, "extra", "[" * 100 + "]" * 100)),
]
MISSING_ID = [("missing instance_id", lambda p: body(p, instance_id=...)), ("null instance_id", lambda p: body(p, instance_id=None))]

SPECIFIC = {
    REGISTER: [
        ("missing host", lambda p: body(p, host=...)),
        ("missing port", lambda p: body(p, port=...)),
        ("host int", lambda p: body(p, host=10)),
        ("host null", lambda p: body(p, host=None)),
        ("host with nul", lambda p: body(p, host="10.0.0.\u00009")),
        ("port string", lambda p: body(p, port="abc")),
        ("port true", lambda p: body(p, port=True)),
        ("port fraction", lambda p: body(p, port=80.5)),
        ("port 0", lambda p: body(p, port=0)),
        ("port negative", lambda p: body(p, port=-1)),
        ("port 65536", lambda p: body(p, port=65536)),
        ("port 70000", lambda p: body(p, port=70000)),
        ("port huge", lambda p: body(p, port=2**70)),
        ("port NaN", lambda p: literal(p, "port", "NaN")),
        ("weight negative", lambda p: body(p, weight=-0.5)),
        ("weight string", lambda p: body(p, weight="heavy")),
        ("weight true", lambda p: body(p, weight=True)),
        ("weight Infinity", lambda p: literal(p, "weight", "Infinity")),
        ("weight 1e400", lambda p: literal(p, "weight", "1e400")),
        ("weight NaN", lambda p: literal(p, "weight", "NaN")),
        ("endpoints string", lambda p: body(p, endpoints="/v1")),
        ("endpoints of ints", lambda p: body(p, endpoints=[1, 2])),
        ("tags object", lambda p: body(p, tags={"a": 1})),
        ("tags with nul", lambda p: body(p, tags=["a\u0000"])),
        ("meta list", lambda p: body(p, meta=[1, 2])),
        ("meta string", lambda p: body(p, meta="x")),
        ("meta with nul", lambda p: body(p, meta={"k": "v\u0000"})),
        ("meta with NaN", lambda p: literal(p, "k", "NaN", inside="meta")),
        ("meta with a lone surrogate", lambda p: literal(p, "k", '"\\ud800"', inside="meta")),
        ("meta nested too deeply", lambda p: literal(p, "k", '{"a":' * 80 + "1" + "}" * 80, inside="meta")),
        ("capabilities list", lambda p: body(p, capabilities=["lora"])),
        ("weight beyond any real quantity", lambda p: body(p, weight=1e308)),
        ("no id and a host too long to derive one", lambda p: body(p, instance_id=None, host="h" * 255)),
    ],
    HEARTBEAT: [
        ("inflight negative", lambda p: body(p, inflight=-1)),
        ("inflight string", lambda p: body(p, inflight="abc")),
        ("inflight fraction", lambda p: body(p, inflight=1.5)),
        ("inflight true", lambda p: body(p, inflight=True)),
        ("inflight huge", lambda p: body(p, inflight=2**64)),
        ("qps negative", lambda p: body(p, qps_1m=-0.1)),
        ("qps string", lambda p: body(p, qps_1m="fast")),
        ("qps Infinity", lambda p: literal(p, "qps_1m", "Infinity")),
        ("qps 1e400", lambda p: literal(p, "qps_1m", "1e400")),
        ("gpu_util 101", lambda p: body(p, gpu_util=101)),
        ("gpu_util negative", lambda p: body(p, gpu_util=-1)),
        ("gpu_util NaN", lambda p: literal(p, "gpu_util", "NaN")),
        ("gpu_util list", lambda p: body(p, gpu_util=[50])),
        ("inflight past what a pool sum can hold", lambda p: body(p, inflight=2**62)),
        ("qps beyond any real rate", lambda p: body(p, qps_1m=1e308)),
    ],
    SNAPSHOT: [
        ("missing snapshot", lambda p: body(p, snapshot=...)),
        ("null snapshot", lambda p: body(p, snapshot=None)),
        ("snapshot list", lambda p: body(p, snapshot=[make_snapshot()])),
        ("snapshot string", lambda p: body(p, snapshot="cpu=1")),
        ("snapshot number", lambda p: body(p, snapshot=1)),
        ("metadata list", lambda p: body(p, metadata=[1])),
        ("metadata string", lambda p: body(p, metadata="x")),
        ("snapshot with NaN", lambda p: literal(p, "timestamp_ms", "NaN", inside="snapshot")),
        ("snapshot with Infinity", lambda p: literal(p, "timestamp_ms", "Infinity", inside="snapshot")),
        ("snapshot with -Infinity", lambda p: literal(p, "timestamp_ms", "-Infinity", inside="snapshot")),
        ("snapshot with 1e400", lambda p: literal(p, "timestamp_ms", "1e400", inside="snapshot")),
        ("snapshot with nul", lambda p: body(p, snapshot={**make_snapshot(), "hostname": "gpu\u0000"})),
        ("snapshot with a nested nul", lambda p: body(p, snapshot=make_snapshot(runtime={"a": [{"b": "\u0000"}]}))),
        ("metadata with NaN", lambda p: literal(p, "report_seq", "NaN", inside="metadata")),
        ("metadata with nul", lambda p: body(p, metadata={"reported_instance_id": "i\u00001"})),
        ("snapshot with a lone surrogate", lambda p: literal(p, "hostname", '"gpu\\udc00"', inside="snapshot")),
        ("snapshot with a lone surrogate key", lambda p: literal(p, "runtime", '{"\\ud800": 1}', inside="snapshot")),
        ("snapshot nested too deeply", lambda p: literal(p, "runtime", "[" * 3000 + "]" * 3000, inside="snapshot")),
    ],
    UNREGISTER: [],
}

CASES = [
    pytest.param(path, make, id=f"{path.rsplit('/', 1)[1]}: {name}")
    for path in POST_ENDPOINTS
    for name, make in COMMON + (MISSING_ID if path != REGISTER else []) + SPECIFIC[path]
]


@pytest.fixture
def existing(register_instance, report, instance_heartbeat, frozen):
    """i-1 with a load and a resource, last seen 10 s ago; returns a snapshot of all it stores."""
    register_instance("i-1", host="10.0.0.1", port=8000, weight=1.0, meta={"old": 1})
    instance_heartbeat("i-1", inflight=1, qps_1m=1.0, gpu_util=10.0)
    report("i-1", make_snapshot(cpu=11.0), seq=5)
    frozen.shift(10)
    return stored_state


def stored_state():
    return {
        "instances": [model_to_dict(i) for i in Instance.objects.order_by("pk")],
        "resources": [model_to_dict(r) for r in InstanceResource.objects.order_by("pk")],
        "changes": InstanceStatusChange.objects.count(),
    }


def assert_envelope(response, status=400, error="validation_error"):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"ok", "error", "detail"}
    assert body["ok"] is False
    assert body["error"] == error
    assert isinstance(body["detail"], dict) and body["detail"]
    # Flat: a list of messages per field, a nested field named by its path (SPEC 1).
    for messages in body["detail"].values():
        assert isinstance(messages, list) and messages and all(isinstance(m, str) for m in messages)


@pytest.mark.parametrize(("path", "make"), CASES)
def test_it_rejects_bad_input_in_the_envelope_and_writes_nothing(api, existing, path, make):
    before = existing()
    response = api.post(path, raw=make(path))
    assert_envelope(response)
    assert existing() == before


@pytest.mark.parametrize("path", POST_ENDPOINTS)
def test_it_accepts_the_valid_bodies_the_cases_start_from(api, existing, path):
    # The cases above differ from these by one field, so each 400 is that field's.
    before = existing()
    response = api.post(path, raw=json.dumps(VALID[path]))
    assert response.status_code == 200, response.content
    assert response.json().get("ok", True) is True
    assert existing() != before


@pytest.mark.parametrize("path", POST_ENDPOINTS)
def test_it_refuses_a_body_over_the_limit_with_413(api, existing, settings, path):
    settings.FLEETWATCH_MAX_BODY_BYTES = 1024
    before = existing()
    response = api.post(path, raw=body(path, padding="x" * 2048))
    assert_envelope(response, status=413, error="payload_too_large")
    assert existing() == before


@pytest.mark.parametrize("path", POST_ENDPOINTS)
def test_it_refuses_a_body_over_the_default_limit_of_256_kib(api, existing, path):
    before = existing()
    response = api.post(path, raw=body(path, padding="x" * (256 * 1024)))
    assert_envelope(response, status=413, error="payload_too_large")
    assert existing() == before


@pytest.mark.parametrize("path", POST_ENDPOINTS)
def test_it_refuses_a_body_that_is_not_json(client, existing, path):
    before = existing()
    response = client.post(path, data={"instance_id": "i-1", "host": "h", "port": "1"})
    assert 400 <= response.status_code < 500
    assert response.json()["ok"] is False
    assert "error" in response.json()
    assert existing() == before


@pytest.mark.parametrize("path", POST_ENDPOINTS)
def test_it_refuses_get_on_a_post_endpoint(api, existing, path):
    before = existing()
    response = api.get(path)
    assert response.status_code == 405
    assert response.json()["ok"] is False
    assert existing() == before


@pytest.mark.parametrize("path", [HEARTBEAT, SNAPSHOT, UNREGISTER])
def test_it_writes_nothing_for_an_unknown_instance(api, frozen, path):
    response = api.post(path, raw=body(path, instance_id="i-nobody"))
    assert response.status_code == 200
    assert response.json()["ok"] is False
    assert not Instance.objects.exists()
    assert not InstanceResource.objects.exists()
    assert not InstanceStatusChange.objects.exists()


# --- query parameters --------------------------------------------------------------------

GET_WITH_INCLUDE_DEAD = ["/v1/instance/list", "/debug/instance_resources", "/debug/instance_loads"]


@pytest.mark.parametrize("path", GET_WITH_INCLUDE_DEAD)
@pytest.mark.parametrize("word", ["maybe", "", "2", "truth", "null"])
def test_it_refuses_a_query_boolean_it_cannot_read(api, frozen, path, word):
    response = api.get(path, include_dead=word)
    assert_envelope(response)
    assert "include_dead" in response.json()["detail"]


@pytest.mark.parametrize("path", GET_WITH_INCLUDE_DEAD)
@pytest.mark.parametrize("word", ["true", "FALSE", "1", "0", "Yes", "no", "ON", "off"])
def test_it_reads_every_query_boolean_word(api, frozen, path, word):
    assert api.get(path, include_dead=word).status_code == 200


@pytest.mark.parametrize(
    "params",
    [{"limit": "abc"}, {"limit": "0"}, {"limit": "-1"}, {"limit": "1.5"}, {"limit": ""}, {"limit": "10001"},
     {"offset": "x"}, {"offset": "-1"}, {"limit": "5", "offset": "-3"}, {"limit": str(2**70)}],
)
def test_it_refuses_a_bad_page(api, frozen, params):
    response = api.get("/v1/instance/list", **params)
    assert_envelope(response)
    assert set(response.json()["detail"]) <= {"limit", "offset"}


def test_it_answers_an_unknown_path_with_a_json_404(api, frozen):
    response = api.get("/v1/instance/nothing-here")
    assert response.status_code == 404
    assert response.json()["ok"] is False


@pytest.mark.parametrize("path", [*POST_ENDPOINTS, "/v1/placement"])
def test_it_refuses_a_chunked_body_with_411_never_reading_it_as_empty(api, existing, path):
    # WSGI reads Content-Length bytes: a chunked body would be read as empty, and an empty body is no data (a
    # placement with no model and no count answered 200, a report a misleading 400 "instance_id required").
    before = existing()
    raw = body(path) if path in VALID else '{"model": "nomodel", "count": "bad"}'
    response = api.post(path, raw=raw, HTTP_TRANSFER_ENCODING="chunked", CONTENT_LENGTH="")
    assert_envelope(response, status=411, error="length_required")
    assert response["Connection"] == "close"
    assert existing() == before

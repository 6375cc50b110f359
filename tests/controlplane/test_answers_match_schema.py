"""Every answer of the API matches its OpenAPI schema (``openapi/``, ``api/schema/``): the keys and the values' types.

Outside the schemathesis fuzz: a pool and a fleet are made through the API,
then each operation is called for every kind of answer it gives (the compat
answers, pages and bare lists, full and minute resolution, every error), and
each body is validated against the schema the app serves for that path,
method and status. A status the schema does not list is a failure too.
"""

import json

import jsonschema
import pytest
from drf_spectacular.generators import SchemaGenerator

from proxy_app.ops.history import record
from tests.factories import T0_MS, make_capabilities, make_engine, make_gpu, make_pool_resource, make_snapshot

pytestmark = [pytest.mark.django_db, pytest.mark.both_entry_points]


@pytest.fixture(scope="module")
def schema():
    return SchemaGenerator().get_schema(request=None, public=True)


def json_schema(node, components, seen=()):
    """An OpenAPI 3.0 schema object as JSON Schema: references inlined, ``nullable`` as a null alternative."""
    if isinstance(node, list):
        return [json_schema(item, components, seen) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[1]
        assert name not in seen, f"recursive component {name}"
        return json_schema(components[name], components, (*seen, name))
    converted = {key: json_schema(value, components, seen) for key, value in node.items()
                 if key not in ("nullable", "readOnly", "writeOnly", "example", "discriminator")}
    if node.get("nullable"):
        return {"anyOf": [converted, {"type": "null"}]}
    return converted


class Answers:
    """Calls the API and checks each answer against the schema of its operation."""

    def __init__(self, api, schema):
        self.api, self.schema, self.checked = api, schema, set()

    def check(self, method, path, response):
        operation = self.schema["paths"][path.split("?")[0]][method]
        status = str(response.status_code)
        assert status in operation["responses"], (method, path, status, response.content[:300])
        content = operation["responses"][status].get("content", {})
        if "application/json" not in content:
            return response
        body_schema = json_schema(content["application/json"]["schema"], self.schema["components"]["schemas"])
        jsonschema.validate(json.loads(response.content), body_schema)
        self.checked.add((method, path.split("?")[0], status))
        return response

    def post(self, path, body=None, raw=None, **extra):
        return self.check("post", path, self.api.post(path, body, raw=raw, **extra))

    def get(self, path, **params):
        return self.check("get", path, self.api.get(path, **params))


@pytest.fixture
def answers(api, schema, frozen):
    return Answers(api, schema)


def test_every_answer_of_the_proxy_matches_its_schema(answers, frozen):
    answers.post("/v1/instance/register", {"instance_id": "i-1", "host": "10.0.0.1", "port": 8000,
                                           "capabilities": make_capabilities()})
    answers.post("/v1/instance/register", {"instance_id": None, "host": "10.0.0.2", "port": 8000})
    # An engine with LoRA adapters running: the rows' engine_models and engine_loras are lists.
    engine = make_engine(scraped_at_ms=T0_MS, lora={"max": 4, "running": ["sql-lora"], "waiting": []})
    snapshot = {"instance_id": "i-1", "snapshot": make_snapshot(gpus=[make_gpu(0), make_gpu(1)], engines=[engine]),
                "metadata": {"report_seq": 5}}
    assert answers.post("/v1/instance/resource_snapshot", snapshot).json() == {"ok": True}
    late = {**snapshot, "metadata": {"report_seq": 4}}
    assert answers.post("/v1/instance/resource_snapshot", late).json() == {"ok": True, "stale": True}
    stranger = {**snapshot, "instance_id": "nobody"}
    assert answers.post("/v1/instance/resource_snapshot", stranger).json()["error"] == "unknown_instance"
    record()
    frozen.shift(90)
    answers.post("/v1/instance/heartbeat", {"instance_id": "i-1", "inflight": 2, "qps_1m": 1.5, "gpu_util": 40.0})
    answers.post("/v1/instance/heartbeat", {"instance_id": "i-1", "capability_fingerprint": "sha256:" + "0" * 64})
    answers.post("/v1/instance/heartbeat", {"instance_id": "hp_10.0.0.2:8000", "capability_fingerprint": "x"})
    answers.post("/v1/instance/heartbeat", {"instance_id": "nobody"})
    record()
    for params in ({}, {"include_dead": "true"}, {"limit": "1"}, {"offset": "1"}):
        answers.get("/v1/instance/list", **params)
    for range_name in ("15m", "1h", "24h"):
        answers.get("/v1/instance/history", instance_id="i-1", range=range_name)
        answers.get("/debug/pool_resource/history", range=range_name)
    answers.get("/v1/instance/history", instance_id="nobody", range="15m")
    for path in ("/debug/status", "/debug/instance_resources", "/debug/instance_loads", "/debug/pool_resource",
                 "/debug/pool_resource_sources", "/healthz"):
        answers.get(path)
    answers.post("/v1/instance/unregister", {"instance_id": "i-1"})
    answers.post("/v1/instance/unregister", {"instance_id": "i-1"})
    assert {"200", "404"} <= {status for _, _, status in answers.checked}


def test_every_answer_of_placement_matches_its_schema(answers, frozen):
    answers.post("/v1/instance/register", {"instance_id": "i-1", "host": "10.0.0.1", "port": 8000,
                                           "capabilities": make_capabilities()})

    def report(seq, **engine):
        snapshot = make_snapshot(engines=[make_engine(scraped_at_ms=T0_MS, **engine)])
        answers.post("/v1/instance/resource_snapshot", {"instance_id": "i-1", "snapshot": snapshot,
                                                         "metadata": {"report_seq": seq}})

    report(1, requests_waiting=0)
    assert answers.post("/v1/placement", {"model": "tiny", "session_key": "s"}).json()["verdict"] == "accept"
    report(2, requests_waiting=6)
    assert answers.post("/v1/placement", {}).json()["verdict"] == "queue"
    report(3, requests_waiting=60)
    assert answers.post("/v1/placement", {}).status_code == 429
    assert answers.post("/v1/placement", {"model": "other"}).status_code == 503
    assert answers.post("/v1/placement", {"count": 0}).status_code == 400
    assert answers.post("/v1/placement/feedback", {"instance_id": "i-1", "outcome": "error"}).json()["ok"] is True
    answers.post("/v1/placement/feedback", {"instance_id": "nobody", "outcome": "ok"})
    answers.post("/v1/placement/feedback", {"outcome": "ok"})
    assert {("post", "/v1/placement", status) for status in ("200", "429", "503", "400")} <= answers.checked


def test_every_answer_of_the_placement_endpoint_for_nginx_matches_its_schema(answers, api, frozen):
    answers.post("/v1/instance/register", {"instance_id": "i-1", "host": "10.0.0.1", "port": 8000})

    def report(seq, waiting):
        snapshot = make_snapshot(engines=[make_engine(scraped_at_ms=T0_MS, requests_waiting=waiting)])
        answers.post("/v1/instance/resource_snapshot", {"instance_id": "i-1", "snapshot": snapshot,
                                                         "metadata": {"report_seq": seq}})

    report(1, 0)
    assert answers.get("/v1/placement/endpoint", model="tiny")["x-fleetwatch-verdict"] == "accept"
    report(2, 60)
    assert answers.get("/v1/placement/endpoint")["x-fleetwatch-verdict"] == "shed"
    assert answers.get("/v1/placement/endpoint", count="0").status_code == 400
    assert answers.get("/v1/placement/endpoint", HTTP_AUTHORIZATION=f"Bearer {api.token('instance')}").status_code == 403
    assert {("get", "/v1/placement/endpoint", status) for status in ("200", "403", "400")} <= answers.checked


def test_every_answer_of_the_scheduler_matches_its_schema(answers, frozen):
    answers.post("/v1/proxy/register", {"proxy_id": "pxy-a", "host": "10.0.0.1", "port": 8002,
                                        "pool_resource": make_pool_resource()})
    answers.post("/v1/proxy/register", {"proxy_id": None, "host": "10.0.0.2", "port": 8002})
    frozen.shift(90)
    answers.post("/v1/proxy/heartbeat", {"proxy_id": "pxy-a", "inflight": 3, "meta_patch": {"zone": "b"},
                                         "pool_resource": make_pool_resource(cpu=50.0)})
    assert answers.post("/v1/proxy/heartbeat", {"proxy_id": "nobody"}).status_code == 404
    for params in ({}, {"include_dead": "1"}, {"limit": "1", "offset": "0"}):
        answers.get("/v1/proxy/list", **params)
    for range_name in ("15m", "6h"):
        answers.get("/v1/proxy/history", proxy_id="pxy-a", range=range_name)
    answers.get("/v1/proxy/history", proxy_id="nobody", range="1h")
    answers.get("/debug/proxy_pool_resources")
    answers.post("/v1/proxy/unregister", {"proxy_id": "pxy-a"})


BAD_CALLS = [
    ("post", "/v1/instance/register", {"raw": '{"host":'}, 400),
    ("post", "/v1/instance/register", {"body": {"host": "h", "port": 0}}, 400),
    ("post", "/v1/instance/resource_snapshot", {"body": {"instance_id": "i-1", "snapshot": None}}, 400),
    ("post", "/v1/instance/heartbeat", {"body": {"instance_id": "i-1"}, "HTTP_AUTHORIZATION": "Token x"}, 401),
    ("post", "/v1/instance/resource_snapshot", {"body": {}, "HTTP_AUTHORIZATION": "Bearer fw_unknown"}, 401),
    ("post", "/v1/proxy/heartbeat", {"body": {"proxy_id": "p"}, "HTTP_AUTHORIZATION": "READ"}, 403),
    ("post", "/v1/instance/unregister", {"raw": "x" * 300_000}, 413),
    ("get", "/v1/instance/list", {"limit": "0"}, 400),
    ("get", "/debug/pool_resource/history", {"range": "2d"}, 400),
    ("get", "/v1/proxy/list", {"include_dead": "maybe"}, 400),
    ("get", "/debug/status", {"HTTP_AUTHORIZATION": "Bearer"}, 401),
]


@pytest.mark.parametrize("method, path, call, status", BAD_CALLS)
def test_every_error_matches_its_schema(api, answers, method, path, call, status):
    call = dict(call)
    if call.get("HTTP_AUTHORIZATION") == "READ":
        call["HTTP_AUTHORIZATION"] = f"Bearer {api.token('read')}"
    if method == "post":
        response = answers.post(path, call.pop("body", None), raw=call.pop("raw", None), **call)
    else:
        response = answers.get(path, **call)
    assert response.status_code == status
    assert response.json()["ok"] is False


@pytest.mark.parametrize("path", ["/v1/instance/register", "/v1/instance/resource_snapshot", "/v1/proxy/heartbeat"])
def test_the_methods_media_types_and_rate_limits_refused_match_their_schema(api, answers, client, settings, path):
    token = {"HTTP_AUTHORIZATION": f"Bearer {api.token('proxy' if 'proxy' in path else 'instance')}"}
    refused = client.post(path, data="instance_id=i-1", content_type="text/plain", **token)
    assert answers.check("post", path, refused).status_code == 415
    # A method the path does not serve: the 405 its operation documents.
    assert answers.check("post", path, client.get(path, **token)).status_code == 405
    settings.FLEETWATCH_RATE_LIMIT = 1
    statuses = [answers.post(path, {"instance_id": "i-1", "proxy_id": "p"}).status_code for _ in range(2)]
    assert statuses[1] == 429


def test_every_answer_of_a_full_route_lane_matches_its_schema(answers, settings, frozen):
    from controlplane.api import route_gate

    answers.post("/v1/instance/register", {"instance_id": "i-1", "host": "10.0.0.1", "port": 8000})
    settings.FLEETWATCH_ROUTE_SHARE = 0.001  # the bucket refills in 50 s
    lane = route_gate.gate()
    lane.tokens = -lane.burst_s
    for path in ("/v1/placement", "/v1/proxy/placement"):
        assert answers.post(path, {}).json()["error"] == "route_busy"
    assert answers.post("/v1/placement/feedback", {"instance_id": "i-1", "outcome": "ok"}).status_code == 429
    assert answers.get("/v1/placement/endpoint").json()["error"] == "route_busy"
    assert {("post", "/v1/placement", "429"), ("post", "/v1/placement/feedback", "429"),
            ("get", "/v1/placement/endpoint", "403")} <= answers.checked

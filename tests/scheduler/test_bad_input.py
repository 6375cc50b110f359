"""Bad input on every POST endpoint: a 4xx envelope, never a 500, nothing written."""

import json

import pytest

from scheduler_app.models import PoolResourceSample, Proxy, ProxyStatusChange
from tests.factories import T0

pytestmark = pytest.mark.django_db

REGISTER = "/v1/proxy/register"
HEARTBEAT = "/v1/proxy/heartbeat"
UNREGISTER = "/v1/proxy/unregister"
GOOD = {
    REGISTER: {"proxy_id": "pxy-a", "host": "10.0.0.2", "port": 9002, "pool_resource": {"x": 1}},
    HEARTBEAT: {"proxy_id": "pxy-a", "inflight": 1, "pool_resource": {"x": 1}, "meta_patch": {"m": 1}},
    UNREGISTER: {"proxy_id": "pxy-a"},
}

# (raw body, field named in the detail) that every endpoint refuses.
COMMON_BAD = [
    ("{", "body"),
    ("[]", "non_field_errors"),
    ('[{"proxy_id": "pxy-a"}]', "non_field_errors"),
    ('"pxy-a"', "non_field_errors"),
    ('{"proxy_id": 123}', "proxy_id"),
    ('{"proxy_id": ["pxy-a"]}', "proxy_id"),
    ('{"proxy_id": "pxy-a\\u0000"}', "proxy_id"),
]

REGISTER_BAD = [
    ({"host": None}, "host"),
    ({"host": ""}, "host"),
    ({"port": 70000}, "port"),
    ({"port": 0}, "port"),
    ({"port": "abc"}, "port"),
    ({"port": True}, "port"),
    ({"port": 80.5}, "port"),
    ({"weight": -1}, "weight"),
    ({"weight": "heavy"}, "weight"),
    ({"max_capacity": -1}, "max_capacity"),
    ({"max_capacity": 1.5}, "max_capacity"),
    ({"instance_count": "x"}, "instance_count"),
    ({"kv_mem_per_instance_gb": -0.5}, "kv_mem_per_instance_gb"),
    ({"kv_cache_update_policy": 5}, "kv_cache_update_policy"),
    ({"endpoints": "chat/completions"}, "endpoints"),
    ({"tags": [1, 2]}, "tags"),
    ({"meta": ["a"]}, "meta"),
    ({"pool_resource": []}, "pool_resource"),
    ({"pool_resource": "summary"}, "pool_resource"),
]

HEARTBEAT_BAD = [
    ({"inflight": -1}, "inflight"),
    ({"inflight": 1.5}, "inflight"),
    ({"inflight": "many"}, "inflight"),
    ({"qps_1m": -0.1}, "qps_1m"),
    ({"gpu_util": 101}, "gpu_util"),
    ({"gpu_util": False}, "gpu_util"),
    ({"meta_patch": [1]}, "meta_patch"),
    ({"pool_resource": 5}, "pool_resource"),
]

NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e400"]


@pytest.fixture
def known_proxy(register_proxy, frozen):
    """pxy-a registered at T0 with a summary; time then moves on so any write would show."""
    register_proxy("pxy-a", meta={"a": 1}, pool_resource={"first": True})
    frozen.shift(5)
    return Proxy.objects.get(pk="pxy-a")


def snapshot():
    return (
        list(Proxy.objects.values()),
        PoolResourceSample.objects.count(),
        ProxyStatusChange.objects.count(),
    )


def assert_refused(response, field, status=400, error="validation_error"):
    assert response.status_code == status, response.content
    body = response.json()
    assert (body["ok"], body["error"]) == (False, error)
    # A list field's items are named by index: tags[1].
    assert any(key == field or key.startswith((f"{field}[", f"{field}.")) for key in body["detail"]), body
    # The detail is flat: a list of messages per field (SPEC 1).
    assert all(isinstance(messages, list) and messages and all(isinstance(m, str) for m in messages)
               for messages in body["detail"].values())


@pytest.mark.parametrize("path", [REGISTER, HEARTBEAT, UNREGISTER])
@pytest.mark.parametrize("raw, field", COMMON_BAD)
def test_it_refuses_malformed_bodies_on_every_endpoint(api, known_proxy, path, raw, field):
    before = snapshot()

    assert_refused(api.post(path, raw=raw), field)

    assert snapshot() == before


@pytest.mark.parametrize("path, field", [(REGISTER, "host"), (HEARTBEAT, "proxy_id"), (UNREGISTER, "proxy_id")])
def test_it_refuses_an_empty_object_on_every_endpoint(api, known_proxy, path, field):
    before = snapshot()

    assert_refused(api.post(path, {}), field)

    assert snapshot() == before


@pytest.mark.parametrize("change, field", REGISTER_BAD)
def test_it_refuses_wrong_types_and_out_of_range_values_on_register(api, known_proxy, change, field):
    before = snapshot()

    assert_refused(api.post(REGISTER, {**GOOD[REGISTER], **change}), field)

    assert snapshot() == before


def test_it_requires_host_and_port_on_register(api, known_proxy):
    before = snapshot()

    response = api.post(REGISTER, {"proxy_id": "pxy-new"})

    assert_refused(response, "host")
    assert "port" in response.json()["detail"]
    assert snapshot() == before


@pytest.mark.parametrize("change, field", HEARTBEAT_BAD)
def test_it_refuses_wrong_types_and_out_of_range_values_on_heartbeat(api, known_proxy, change, field):
    before = snapshot()

    assert_refused(api.post(HEARTBEAT, {**GOOD[HEARTBEAT], **change}), field)

    assert snapshot() == before
    assert Proxy.objects.get(pk="pxy-a").last_seen_at == T0


@pytest.mark.parametrize("path", [REGISTER, HEARTBEAT, UNREGISTER])
@pytest.mark.parametrize("literal", NON_FINITE)
def test_it_refuses_non_finite_numbers_on_every_endpoint(api, known_proxy, path, literal):
    raw = json.dumps(GOOD[path])[:-1] + f', "weight": {literal}, "inflight": {literal}}}'
    before = snapshot()

    response = api.post(path, raw=raw)

    assert 400 <= response.status_code < 500
    assert response.json()["ok"] is False
    assert snapshot() == before


@pytest.mark.parametrize("path", [REGISTER, HEARTBEAT, UNREGISTER])
def test_it_refuses_non_finite_numbers_nested_in_objects_on_every_endpoint(api, known_proxy, path):
    raw = json.dumps(GOOD[path])[:-1] + ', "pool_resource": {"load": {"ratio": NaN}}}'
    before = snapshot()

    assert_refused(api.post(path, raw=raw), "body")

    assert snapshot() == before


@pytest.mark.parametrize("path", [REGISTER, HEARTBEAT, UNREGISTER])
def test_it_answers_413_for_a_body_over_the_limit_on_every_endpoint(api, known_proxy, path, settings):
    body = {**GOOD[path], "pool_resource": {"padding": "x" * (settings.FLEETWATCH_MAX_BODY_BYTES + 1)}}
    before = snapshot()

    assert_refused(api.post(path, body), "body", status=413, error="payload_too_large")

    assert snapshot() == before


@pytest.mark.parametrize("path", [REGISTER, HEARTBEAT, UNREGISTER])
def test_it_refuses_get_on_every_post_endpoint(api, frozen, path):
    response = api.get(path)

    assert response.status_code == 405
    assert response.json()["ok"] is False


@pytest.mark.parametrize("path", ["/v1/proxy/list", "/debug/proxy_pool_resources", "/v1/proxy/history"])
def test_it_refuses_post_on_read_endpoints(api, frozen, path):
    response = api.post(path, {})

    assert response.status_code == 405
    assert response.json()["ok"] is False


@pytest.mark.parametrize("field, value", [
    ("kv_mem_per_instance_gb", 1e308),
    ("weight", 1e308),
])
def test_it_refuses_quantities_whose_products_could_not_be_sent_back(api, field, value):
    body = {"proxy_id": "pxy-big", "host": "10.0.0.1", "port": 8002, "instance_count": 2**40, field: value}
    response = api.post("/v1/proxy/register", body)
    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"
    assert api.get("/v1/proxy/list").status_code == 200

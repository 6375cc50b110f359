"""The original Instance's capability sync over the API (SPEC 3.2): register, heartbeat, list."""

import json
from pathlib import Path

import pytest

from agent.capabilities import fingerprint, full_view, parse_capabilities
from proxy_app.managers import Heartbeat
from proxy_app.models import Instance
from tests.factories import T0, make_capabilities

pytestmark = [pytest.mark.django_db, pytest.mark.both_entry_points]

CAPABILITIES = make_capabilities()
FINGERPRINT = fingerprint(parse_capabilities(CAPABILITIES))
OTHER = make_capabilities(model={"identifier": "mistralai/Mistral-7B", "revision": None})
OTHER_FINGERPRINT = fingerprint(parse_capabilities(OTHER))
# Computed by the original Instance's code (tests/proxy/data/capability_vectors.json).
VECTORS = json.loads((Path(__file__).parent / "data" / "capability_vectors.json").read_text("utf-8"))["vectors"]


def register(api, **fields):
    response = api.post("/v1/instance/register", {"instance_id": "i-1", "host": "10.0.0.1", "port": 8000, **fields})
    assert response.status_code == 200, response.content
    return response.json()


def beat(api, **fields):
    return api.post("/v1/instance/heartbeat", {"instance_id": "i-1", **fields})


def stored(instance_id="i-1"):
    instance = Instance.objects.get(pk=instance_id)
    return instance.capabilities, instance.capability_fingerprint


def test_it_answers_the_fingerprint_of_registered_capabilities(api, frozen):
    body = register(api, capabilities=CAPABILITIES)
    assert body["capability_fingerprint"] == FINGERPRINT
    assert FINGERPRINT.startswith("sha256:") and len(FINGERPRINT) == 71
    assert stored() == (parse_capabilities(CAPABILITIES), FINGERPRINT)


def test_it_answers_a_null_fingerprint_without_capabilities(api, frozen):
    assert register(api)["capability_fingerprint"] is None
    assert stored() == (None, None)


@pytest.mark.parametrize("again", [{}, {"capabilities": None}])
def test_it_clears_the_capabilities_on_a_re_register_without_them(api, frozen, again):
    register(api, capabilities=CAPABILITIES)
    assert register(api, **again)["capability_fingerprint"] is None
    assert stored() == (None, None)


def test_it_replaces_the_capabilities_on_a_re_register(api, frozen):
    register(api, capabilities=CAPABILITIES)
    assert register(api, capabilities=OTHER)["capability_fingerprint"] == OTHER_FINGERPRINT
    assert stored() == (parse_capabilities(OTHER), OTHER_FINGERPRINT)


def test_it_takes_a_matching_fingerprint_heartbeat_as_a_heartbeat(api, frozen):
    register(api, capabilities=CAPABILITIES)
    frozen.shift(5)
    response = beat(api, capability_fingerprint=FINGERPRINT, inflight=3)
    assert response.json() == {"ok": True}
    instance = Instance.objects.get(pk="i-1")
    assert (instance.last_seen_at, instance.inflight) == (T0 + 5, 3)


def test_it_takes_a_matching_fingerprint_heartbeat_in_one_statement(api, frozen, django_assert_num_queries):
    register(api, capabilities=CAPABILITIES)
    with django_assert_num_queries(1):
        assert Instance.objects.heartbeat("i-1", T0 + 5, {"inflight": 3}, reported_fingerprint=FINGERPRINT) == (
            Heartbeat.OK, None)


def test_it_revives_a_stale_instance_on_a_matching_fingerprint_heartbeat(api, frozen):
    register(api, capabilities=CAPABILITIES)
    frozen.shift(40)
    Instance.objects.sweep(T0 + 40)
    assert beat(api, capability_fingerprint=FINGERPRINT, inflight=3).json() == {"ok": True}
    instance = Instance.objects.get(pk="i-1")
    assert (instance.status, instance.last_seen_at, instance.inflight) == ("alive", T0 + 40, 3)


def test_it_rejects_a_mismatching_fingerprint_without_refreshing_liveness_or_load(api, frozen):
    register(api, capabilities=CAPABILITIES)
    beat(api, inflight=1)
    frozen.shift(5)
    response = beat(api, capability_fingerprint=OTHER_FINGERPRINT, inflight=9, qps_1m=4.0)
    assert response.status_code == 200
    assert response.json() == {
        "ok": False, "error": "capability_fingerprint_mismatch", "requires_capabilities": True,
        "expected_fingerprint": FINGERPRINT, "reported_fingerprint": OTHER_FINGERPRINT,
    }
    instance = Instance.objects.get(pk="i-1")
    assert (instance.last_seen_at, instance.inflight, instance.qps_1m) == (T0, 1, None)


def test_it_asks_for_capabilities_when_it_holds_none(api, frozen):
    register(api)  # e.g. a Proxy that restarted on an empty database and was registered without them
    frozen.shift(5)
    response = beat(api, capability_fingerprint=FINGERPRINT)
    assert response.json() == {
        "ok": False, "error": "capability_fingerprint_unknown", "requires_capabilities": True,
        "expected_fingerprint": None, "reported_fingerprint": FINGERPRINT,
    }
    assert Instance.objects.get(pk="i-1").last_seen_at == T0


def test_it_replaces_the_capabilities_sent_on_a_heartbeat(api, frozen):
    register(api)
    frozen.shift(5)
    assert beat(api, capabilities=CAPABILITIES, inflight=2).json() == {"ok": True}
    assert stored() == (parse_capabilities(CAPABILITIES), FINGERPRINT)
    assert Instance.objects.get(pk="i-1").last_seen_at == T0 + 5
    # The instance's next fingerprint-only heartbeat now matches.
    assert beat(api, capability_fingerprint=FINGERPRINT).json() == {"ok": True}


def test_it_answers_unknown_instance_to_a_fingerprint_heartbeat_of_a_stranger(api, frozen):
    response = beat(api, capability_fingerprint=FINGERPRINT)
    assert response.json() == {"ok": False, "error": "unknown_instance"}
    assert not Instance.objects.exists()


def test_it_treats_a_null_fingerprint_as_absent(api, frozen):
    register(api, capabilities=CAPABILITIES)
    assert beat(api, capability_fingerprint=None).json() == {"ok": True}


@pytest.mark.parametrize("vector", VECTORS, ids=lambda vector: json.dumps(vector["sent"], ensure_ascii=False))
def test_it_agrees_with_the_originals_fingerprint_from_register_to_heartbeat(api, frozen, vector):
    assert register(api, capabilities=vector["sent"])["capability_fingerprint"] == vector["fingerprint"]
    [row] = api.get("/v1/instance/list").json()
    assert row["capability_fingerprint"] == vector["fingerprint"]
    assert parse_capabilities(row["capabilities"]) == json.loads(vector["canonical"])
    frozen.shift(5)
    assert beat(api, capability_fingerprint=vector["fingerprint"], inflight=2).json() == {"ok": True}
    assert Instance.objects.get(pk="i-1").last_seen_at == T0 + 5


def test_it_lists_capabilities_with_every_field_and_the_fingerprint(api, frozen):
    register(api, capabilities={"model": {"identifier": "m"}})
    [row] = api.get("/v1/instance/list").json()
    assert row["capability_fingerprint"] == fingerprint(parse_capabilities({"model": {"identifier": "m"}}))
    assert row["capabilities"] == full_view(parse_capabilities({"model": {"identifier": "m"}}))
    assert row["capabilities"]["tokenizer"] == {"identifier": None, "revision": None}
    assert row["capabilities"]["model"] == {"identifier": "m", "revision": None}
    assert row["capabilities"]["adapters"] == []
    assert row["capabilities"]["runtime"]["supported_cache_features"] == []


def test_it_takes_the_capabilities_of_a_heartbeat_that_also_carries_a_fingerprint(api, frozen):
    """As the original Proxy does: the object wins, the fingerprint beside it is not compared."""
    register(api, capabilities=CAPABILITIES)
    frozen.shift(5)
    assert beat(api, capabilities=OTHER, capability_fingerprint=FINGERPRINT).json() == {"ok": True}
    assert stored() == (parse_capabilities(OTHER), OTHER_FINGERPRINT)
    assert Instance.objects.get(pk="i-1").last_seen_at == T0 + 5


@pytest.mark.parametrize("endpoint, body", [
    ("register", {"capabilities": {"kv_cache": {"block_size": 0}}}),
    ("register", {"capabilities": {"unknown": 1}}),
    ("register", {"capabilities": {"parallelism": {"tensor_parallel_size": -2}}}),
    ("register", {"capabilities": {"adapters": [{"revision": "v1"}]}}),
    ("register", {"capabilities": {"runtime": {"supported_cache_features": "prefix"}}}),
    ("register", {"capabilities": "everything"}),
    ("heartbeat", {"capabilities": {"kv_cache": {"block_size": 0}}}),
    ("heartbeat", {"capability_fingerprint": 12345}),
    ("heartbeat", {"capability_fingerprint": ["sha256:x"]}),
    ("heartbeat", {"capability_fingerprint": "sha256:" + "0" * 200}),
])
def test_it_refuses_bad_capabilities_and_fingerprints_writing_nothing(api, frozen, endpoint, body):
    register(api, capabilities=CAPABILITIES)
    beat(api, inflight=1)
    before = Instance.objects.values().get(pk="i-1")
    frozen.shift(5)
    response = api.post(f"/v1/instance/{endpoint}", {"instance_id": "i-1", "host": "10.0.0.2", "port": 8001, **body})
    assert response.status_code == 400
    answer = response.json()
    assert answer["ok"] is False and answer["error"] == "validation_error"
    assert all(key.startswith(("capabilities", "capability_fingerprint")) for key in answer["detail"])
    assert all(isinstance(messages, list) for messages in answer["detail"].values())
    assert Instance.objects.values().get(pk="i-1") == before


def test_it_names_the_nested_field_of_a_bad_capability(api, frozen):
    response = api.post("/v1/instance/register", {
        "instance_id": "i-1", "host": "h", "port": 1, "capabilities": {"adapters": [{"identifier": "a"}, {}]},
    })
    assert response.json()["detail"] == {"capabilities.adapters[1].identifier": ["This field is required."]}

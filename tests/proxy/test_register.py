"""POST /v1/instance/register (SPEC 3)."""

import pytest

from agent.capabilities import parse_capabilities
from proxy_app.models import Instance, InstanceResource, InstanceStatusChange
from tests.factories import T0, make_capabilities

pytestmark = pytest.mark.django_db


def test_it_registers_an_instance_and_hands_out_the_heartbeat_interval(api, frozen):
    response = api.post("/v1/instance/register", {"instance_id": "i-1", "host": "10.0.0.1", "port": 8000})
    assert response.status_code == 200
    assert response.json() == {
        "instance_id": "i-1", "heartbeat_interval_s": 10, "ttl_s": 30, "capability_fingerprint": None,
    }


def test_it_stores_what_was_registered(api, frozen):
    api.post("/v1/instance/register", {
        "instance_id": "i-1", "host": "gpu-1.local", "port": 8001, "endpoints": ["/v1/chat/completions"],
        "tags": ["h100", "prefill"], "weight": 2.5, "meta": {"model": "llama"}, "capabilities": make_capabilities(),
    })
    instance = Instance.objects.get(pk="i-1")
    assert instance.host == "gpu-1.local"
    assert instance.port == 8001
    assert instance.endpoints == ["/v1/chat/completions"]
    assert instance.tags == ["h100", "prefill"]
    assert instance.weight == 2.5
    assert instance.meta == {"model": "llama"}
    assert instance.capabilities == parse_capabilities(make_capabilities())
    assert instance.registered_at == T0
    assert instance.last_seen_at == T0
    assert instance.status == "alive"


def test_it_fills_the_defaults(api, frozen):
    api.post("/v1/instance/register", {"instance_id": "i-1", "host": "10.0.0.1", "port": 8000})
    instance = Instance.objects.get(pk="i-1")
    assert instance.endpoints == []
    assert instance.tags == []
    assert instance.weight == 1.0
    assert instance.meta == {}
    assert instance.capabilities is None
    assert (instance.inflight, instance.qps_1m, instance.gpu_util) == (None, None, None)
    assert not InstanceResource.objects.exists()


def test_it_treats_null_lists_and_meta_as_absent(api, frozen):
    response = api.post("/v1/instance/register", {
        "instance_id": "i-1", "host": "10.0.0.1", "port": 8000, "endpoints": None, "tags": None, "meta": None,
    })
    assert response.status_code == 200
    instance = Instance.objects.get(pk="i-1")
    assert (instance.endpoints, instance.tags, instance.meta) == ([], [], {})


@pytest.mark.parametrize("instance_id", [None, ""])
def test_it_names_an_instance_without_an_id_by_host_and_port(api, frozen, instance_id):
    response = api.post("/v1/instance/register", {"instance_id": instance_id, "host": "10.0.0.7", "port": 9000})
    assert response.status_code == 200
    assert response.json()["instance_id"] == "hp_10.0.0.7:9000"
    assert Instance.objects.filter(pk="hp_10.0.0.7:9000").exists()


def test_it_names_an_instance_that_sends_no_id_field_by_host_and_port(api, frozen):
    response = api.post("/v1/instance/register", {"host": "10.0.0.7", "port": 9000})
    assert response.json()["instance_id"] == "hp_10.0.0.7:9000"


@pytest.mark.parametrize(("ttl_s", "interval"), [(30, 10), (60, 10), (12, 4), (9, 3), (3, 1), (2, 1), (1, 1)])
def test_it_hands_out_a_third_of_the_ttl_between_one_and_ten_seconds(api, frozen, settings, ttl_s, interval):
    settings.FLEETWATCH_INSTANCE_TTL_S = ttl_s
    body = api.post("/v1/instance/register", {"instance_id": "i-1", "host": "h", "port": 1}).json()
    assert body["ttl_s"] == ttl_s
    assert body["heartbeat_interval_s"] == interval


def test_it_ignores_unknown_fields(api, frozen):
    response = api.post("/v1/instance/register", {"instance_id": "i-1", "host": "h", "port": 1, "future": [1, 2]})
    assert response.status_code == 200


def test_it_records_the_first_registration(register_instance, frozen):
    register_instance("i-1")
    change = InstanceStatusChange.objects.get(instance_id="i-1")
    assert (change.old_status, change.new_status, change.reason, change.at) == ("", "alive", "registered", T0)


# --- re-register ---------------------------------------------------------------------

@pytest.fixture
def known(register_instance, report, instance_heartbeat, frozen):
    """i-1 registered with everything, with a load and a resource, 5 s ago."""
    register_instance("i-1", host="10.0.0.1", port=8000, endpoints=["/a"], tags=["t1"], weight=2.0,
             meta={"model": "llama", "zone": "a"}, capabilities=make_capabilities())
    instance_heartbeat("i-1", inflight=3, qps_1m=1.5, gpu_util=40.0)
    report("i-1")
    frozen.shift(5)
    return "i-1"


def test_it_replaces_host_port_and_weight_on_re_register(register_instance, known):
    register_instance("i-1", host="10.0.0.2", port=9000, weight=0.5)
    instance = Instance.objects.get(pk="i-1")
    assert (instance.host, instance.port, instance.weight) == ("10.0.0.2", 9000, 0.5)


def test_it_keeps_endpoints_and_tags_when_re_registered_without_them(register_instance, known):
    register_instance("i-1", endpoints=[], tags=[])
    instance = Instance.objects.get(pk="i-1")
    assert instance.endpoints == ["/a"]
    assert instance.tags == ["t1"]


def test_it_replaces_endpoints_and_tags_when_re_registered_with_them(register_instance, known):
    register_instance("i-1", endpoints=["/b", "/c"], tags=["t2"])
    instance = Instance.objects.get(pk="i-1")
    assert instance.endpoints == ["/b", "/c"]
    assert instance.tags == ["t2"]


def test_it_merges_meta_on_re_register(register_instance, known):
    register_instance("i-1", meta={"zone": "b", "rack": 7})
    assert Instance.objects.get(pk="i-1").meta == {"model": "llama", "zone": "b", "rack": 7}


def test_it_keeps_registered_at_load_and_resource_on_re_register(register_instance, known, listed_instances):
    before = listed_instances()["i-1"]
    register_instance("i-1", host="10.0.0.2")
    after = listed_instances()["i-1"]
    assert after["registered_at"] == T0
    assert after["last_seen_at"] == T0 + 5
    assert after["load"] == {"inflight": 3, "qps_1m": 1.5, "gpu_util": 40.0}
    assert after["resource"] == before["resource"]
    assert after["resource"]["cpu_util"] == 10.0


def test_it_replaces_capabilities_and_clears_them_when_none_are_sent(register_instance, known):
    other = make_capabilities(runtime={"vllm_version": "0.9.0"})
    register_instance("i-1", capabilities=other)
    assert Instance.objects.get(pk="i-1").capabilities == parse_capabilities(other)
    register_instance("i-1")
    assert Instance.objects.get(pk="i-1").capabilities is None


def test_it_refreshes_last_seen_on_re_register(register_instance, known):
    register_instance("i-1")
    assert Instance.objects.get(pk="i-1").last_seen_at == T0 + 5


def test_it_answers_a_re_register_like_a_first_one(api, known):
    response = api.post("/v1/instance/register", {"instance_id": "i-1", "host": "10.0.0.1", "port": 8000})
    assert response.json() == {
        "instance_id": "i-1", "heartbeat_interval_s": 10, "ttl_s": 30, "capability_fingerprint": None,
    }
    assert Instance.objects.count() == 1


def test_it_records_nothing_when_an_alive_instance_re_registers(register_instance, known):
    register_instance("i-1")
    assert InstanceStatusChange.objects.filter(instance_id="i-1").count() == 1


def test_it_revives_a_stale_instance_that_re_registers(register_instance, known, frozen, listed_instances):
    frozen.shift(60)
    Instance.objects.sweep(T0 + 65)
    register_instance("i-1")
    assert listed_instances()["i-1"]["is_alive"] is True
    latest = InstanceStatusChange.objects.filter(instance_id="i-1").first()
    assert (latest.old_status, latest.new_status, latest.reason) == ("stale", "alive", "re-registered")
    assert Instance.objects.get(pk="i-1").status == "alive"

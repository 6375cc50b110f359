"""POST /v1/proxy/register (SPEC 6)."""

import re

import pytest

from scheduler_app.models import PoolResourceSample, Proxy, ProxyStatusChange
from tests.factories import T0, make_pool_resource

pytestmark = pytest.mark.django_db


def test_it_answers_the_id_the_heartbeat_interval_and_the_ttl(api, frozen):
    response = api.post("/v1/proxy/register", {"proxy_id": "pxy-a", "host": "10.0.0.1", "port": 8002})

    assert response.status_code == 200
    body = response.json()
    assert body == {"proxy_id": "pxy-a", "heartbeat_interval_s": 5, "ttl_s": 30}
    assert isinstance(body["heartbeat_interval_s"], int)


def test_it_answers_a_fractional_heartbeat_interval_as_a_float(api, frozen, settings):
    settings.FLEETWATCH_PROXY_HEARTBEAT_S = 2.5
    settings.FLEETWATCH_PROXY_TTL_S = 12

    body = api.post("/v1/proxy/register", {"host": "10.0.0.1", "port": 8002}).json()

    assert body["heartbeat_interval_s"] == 2.5
    assert body["ttl_s"] == 12


@pytest.mark.parametrize("given", [{"proxy_id": None}, {"proxy_id": ""}, {}])
def test_it_makes_up_an_id_when_none_is_given(api, frozen, given):
    first = api.post("/v1/proxy/register", {"host": "10.0.0.1", "port": 8002, **given}).json()["proxy_id"]
    second = api.post("/v1/proxy/register", {"host": "10.0.0.1", "port": 8002, **given}).json()["proxy_id"]

    assert re.fullmatch(r"pxy_[0-9a-f]{12}", first)
    assert first != second
    assert set(Proxy.objects.values_list("proxy_id", flat=True)) == {first, second}


def test_it_stores_the_defaults_of_a_minimal_register(register_proxy, frozen):
    register_proxy("pxy-a")

    proxy = Proxy.objects.get(pk="pxy-a")
    assert (proxy.host, proxy.port) == ("10.0.0.1", 8002)
    assert proxy.endpoints == ["chat/completions", "completions"]
    assert proxy.tags == [] and proxy.meta == {} and proxy.weight == 1.0
    assert (proxy.max_capacity, proxy.instance_count, proxy.kv_mem_per_instance_gb) == (0, 0, 0.0)
    assert proxy.kv_cache_update_policy == "lru"
    assert (proxy.inflight, proxy.qps_1m, proxy.gpu_util) == (None, None, None)
    assert proxy.pool_resource is None and proxy.pool_resource_reported_at is None
    assert proxy.registered_at == proxy.last_seen_at == T0
    assert proxy.status == "alive"


def test_it_stores_every_declared_field(register_proxy, frozen):
    register_proxy(
        "pxy-a", endpoints=["chat/completions"], tags=["gpu", "h100"], weight=2.5, meta={"zone": "a"},
        max_capacity=16, instance_count=4, kv_mem_per_instance_gb=128.0, kv_cache_update_policy="fifo",
    )

    proxy = Proxy.objects.get(pk="pxy-a")
    assert proxy.endpoints == ["chat/completions"]
    assert proxy.tags == ["gpu", "h100"]
    assert proxy.weight == 2.5
    assert proxy.meta == {"zone": "a"}
    assert (proxy.max_capacity, proxy.instance_count, proxy.kv_mem_per_instance_gb) == (16, 4, 128.0)
    assert proxy.kv_cache_pool_gb == 512.0
    assert proxy.kv_cache_update_policy == "fifo"


@pytest.mark.parametrize("policy", [None, ""])
def test_it_takes_lru_for_an_unchosen_kv_cache_policy(register_proxy, frozen, policy):
    register_proxy("pxy-a", kv_cache_update_policy=policy)

    assert Proxy.objects.get(pk="pxy-a").kv_cache_update_policy == "lru"


def test_it_records_the_first_register_as_a_change_to_alive(register_proxy, frozen):
    register_proxy("pxy-a")

    change = ProxyStatusChange.objects.get(proxy_id="pxy-a")
    assert (change.old_status, change.new_status, change.reason, change.at) == ("", "alive", "registered", T0)


def test_it_stores_a_pool_resource_with_the_receive_time_and_keeps_a_sample(register_proxy, frozen):
    summary = make_pool_resource(alive=3, total=4, unknown_key={"kept": [1, 2]})

    register_proxy("pxy-a", pool_resource=summary)

    proxy = Proxy.objects.get(pk="pxy-a")
    assert proxy.pool_resource == summary
    assert proxy.pool_resource_reported_at == T0
    sample = PoolResourceSample.objects.get(proxy_id="pxy-a")
    assert sample.t == T0
    assert sample.summary == summary
    assert (sample.alive, sample.total) == (3, 4)


def test_it_keeps_registered_at_and_replaces_the_other_fields_on_re_register(register_proxy, frozen):
    register_proxy("pxy-a", host="10.0.0.1", port=8002, tags=["old"], meta={"a": 1, "b": 2}, weight=1.0,
                   max_capacity=8, instance_count=1, kv_mem_per_instance_gb=64.0)
    frozen.shift(10)

    register_proxy("pxy-a", host="10.0.0.2", port=9002, tags=["new"], meta={"c": 3}, weight=3.0,
                   max_capacity=4, instance_count=2, kv_mem_per_instance_gb=32.0)

    proxy = Proxy.objects.get(pk="pxy-a")
    assert proxy.registered_at == T0
    assert proxy.last_seen_at == T0 + 10
    assert (proxy.host, proxy.port, proxy.weight) == ("10.0.0.2", 9002, 3.0)
    assert proxy.tags == ["new"]
    assert proxy.meta == {"c": 3}
    assert (proxy.max_capacity, proxy.instance_count, proxy.kv_mem_per_instance_gb) == (4, 2, 32.0)
    assert Proxy.objects.count() == 1


@pytest.mark.parametrize("again", [{}, {"pool_resource": None}])
def test_it_keeps_the_previous_pool_resource_on_a_re_register_without_one(register_proxy, frozen, again):
    summary = make_pool_resource()
    register_proxy("pxy-a", pool_resource=summary)
    frozen.shift(10)

    register_proxy("pxy-a", **again)

    proxy = Proxy.objects.get(pk="pxy-a")
    assert proxy.pool_resource == summary
    assert proxy.pool_resource_reported_at == T0
    assert PoolResourceSample.objects.count() == 1


def test_it_replaces_the_pool_resource_on_a_re_register_with_one(register_proxy, frozen):
    register_proxy("pxy-a", pool_resource=make_pool_resource(cpu=10.0))
    frozen.shift(10)

    register_proxy("pxy-a", pool_resource=make_pool_resource(cpu=90.0))

    proxy = Proxy.objects.get(pk="pxy-a")
    assert proxy.pool_resource["utilization"]["cpu_avg"] == 90.0
    assert proxy.pool_resource_reported_at == T0 + 10
    assert PoolResourceSample.objects.count() == 2


def test_it_keeps_the_load_from_heartbeats_on_re_register(register_proxy, proxy_heartbeat, frozen):
    register_proxy("pxy-a")
    proxy_heartbeat("pxy-a", inflight=3, qps_1m=1.5, gpu_util=40.0)

    register_proxy("pxy-a")

    proxy = Proxy.objects.get(pk="pxy-a")
    assert (proxy.inflight, proxy.qps_1m, proxy.gpu_util) == (3, 1.5, 40.0)


def test_it_revives_a_stale_proxy_that_re_registers_with_a_recorded_change(register_proxy, frozen):
    register_proxy("pxy-a")
    frozen.shift(60)
    Proxy.objects.sweep(T0 + 60)
    assert Proxy.objects.get(pk="pxy-a").status == "stale"

    register_proxy("pxy-a")

    assert Proxy.objects.get(pk="pxy-a").status == "alive"
    change = ProxyStatusChange.objects.order_by("-id").first()
    assert (change.old_status, change.new_status, change.reason) == ("stale", "alive", "re-registered")


def test_it_accepts_and_ignores_unknown_fields(api, frozen):
    response = api.post("/v1/proxy/register", {"proxy_id": "pxy-a", "host": "h", "port": 1, "future": {"x": 1}})

    assert response.status_code == 200
    assert Proxy.objects.filter(pk="pxy-a").exists()

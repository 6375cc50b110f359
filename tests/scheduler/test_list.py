"""GET /v1/proxy/list (SPEC 6, liveness of SPEC 4)."""

import pytest

from tests.factories import T0, make_pool_resource

pytestmark = pytest.mark.django_db

ROW_FIELDS = {
    "proxy_id", "host", "port", "endpoints", "tags", "weight", "meta", "max_capacity", "instance_count",
    "kv_mem_per_instance_gb", "kv_cache_pool_gb", "kv_cache_update_policy", "inflight", "qps_1m", "gpu_util",
    "registered_at", "last_seen_at", "is_alive", "status", "pool_resource", "pool_resource_reported_at",
}


def test_it_answers_a_bare_array_with_every_field(api, register_proxy, proxy_heartbeat, frozen):
    summary = make_pool_resource()
    register_proxy("pxy-a", host="10.0.0.9", port=9002, tags=["t"], meta={"m": 1}, weight=2.0,
                   max_capacity=8, instance_count=3, kv_mem_per_instance_gb=1.5, pool_resource=summary)
    proxy_heartbeat("pxy-a", inflight=2, qps_1m=0.5, gpu_util=33.0)

    body = api.get("/v1/proxy/list").json()

    assert isinstance(body, list)
    (row,) = body
    assert set(row) == ROW_FIELDS
    assert row == {
        "proxy_id": "pxy-a", "host": "10.0.0.9", "port": 9002,
        "endpoints": ["chat/completions", "completions"], "tags": ["t"], "weight": 2.0, "meta": {"m": 1},
        "max_capacity": 8, "instance_count": 3, "kv_mem_per_instance_gb": 1.5, "kv_cache_pool_gb": 4.5,
        "kv_cache_update_policy": "lru", "inflight": 2, "qps_1m": 0.5, "gpu_util": 33.0,
        "registered_at": T0, "last_seen_at": T0, "is_alive": True, "status": "alive",
        "pool_resource": summary, "pool_resource_reported_at": T0,
    }


def test_it_shows_unknown_load_as_null_not_zero(register_proxy, listed_proxies, frozen):
    register_proxy("pxy-a")

    row = listed_proxies()["pxy-a"]

    assert (row["inflight"], row["qps_1m"], row["gpu_util"]) == (None, None, None)
    assert row["pool_resource"] is None and row["pool_resource_reported_at"] is None


def test_it_is_sorted_by_last_seen_newest_first(api, register_proxy, proxy_heartbeat, frozen):
    register_proxy("pxy-a")
    frozen.shift(1)
    register_proxy("pxy-b")
    frozen.shift(1)
    register_proxy("pxy-c")
    frozen.shift(1)
    proxy_heartbeat("pxy-a")

    ids = [row["proxy_id"] for row in api.get("/v1/proxy/list").json()]

    assert ids == ["pxy-a", "pxy-c", "pxy-b"]


def test_it_hides_proxies_past_the_ttl_unless_include_dead(register_proxy, proxy_heartbeat, listed_proxies, frozen):
    register_proxy("pxy-old")
    frozen.shift(31)
    register_proxy("pxy-new")

    assert set(listed_proxies()) == {"pxy-new"}
    assert set(listed_proxies(include_dead="false")) == {"pxy-new"}
    every = listed_proxies(include_dead="TRUE")
    assert set(every) == {"pxy-old", "pxy-new"}
    assert (every["pxy-old"]["is_alive"], every["pxy-old"]["status"]) == (False, "stale")


@pytest.mark.parametrize(
    "after, is_alive, status",
    [(0, True, "alive"), (7, True, "alive"), (8, True, "suspect"), (30, True, "suspect"), (31, False, "stale")],
)
def test_it_computes_status_alive_suspect_stale_at_read_time(register_proxy, listed_proxies, frozen, after, is_alive, status):
    register_proxy("pxy-a")
    frozen.shift(after)

    row = listed_proxies(include_dead="1")["pxy-a"]

    # Computed from last_seen_at at read time: no sweep has run.
    assert (row["is_alive"], row["status"]) == (is_alive, status)


def test_it_follows_the_heartbeat_interval_setting_in_the_status(register_proxy, listed_proxies, frozen, settings):
    settings.FLEETWATCH_PROXY_HEARTBEAT_S = 10
    register_proxy("pxy-a")
    frozen.shift(12)

    assert listed_proxies()["pxy-a"]["status"] == "alive"


def test_it_answers_400_to_a_bad_include_dead(api, frozen):
    response = api.get("/v1/proxy/list", include_dead="maybe")

    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"
    assert "include_dead" in response.json()["detail"]


def test_it_pages_with_limit_and_offset(api, register_proxy, frozen):
    for name in ("pxy-a", "pxy-b", "pxy-c"):
        register_proxy(name)
        frozen.shift(1)

    body = api.get("/v1/proxy/list", limit=2, offset=1).json()

    assert (body["count"], body["limit"], body["offset"]) == (3, 2, 1)
    assert [row["proxy_id"] for row in body["results"]] == ["pxy-b", "pxy-a"]
    assert [r["proxy_id"] for r in api.get("/v1/proxy/list", offset=2).json()["results"]] == ["pxy-a"]


@pytest.mark.parametrize("params", [{"limit": "0"}, {"limit": "x"}, {"offset": "-1"}])
def test_it_answers_400_to_bad_paging(api, frozen, params):
    response = api.get("/v1/proxy/list", **params)

    assert response.status_code == 400
    assert response.json()["ok"] is False


def test_it_reads_with_one_query_however_many_proxies(api, register_proxy, frozen, django_assert_max_num_queries):
    for index in range(6):
        register_proxy(f"pxy-{index}", pool_resource=make_pool_resource())

    with django_assert_max_num_queries(1):
        assert len(api.get("/v1/proxy/list", include_dead="true").json()) == 6
    with django_assert_max_num_queries(2):
        assert len(api.get("/v1/proxy/list", limit=4).json()["results"]) == 4

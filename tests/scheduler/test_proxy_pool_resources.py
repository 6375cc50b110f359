"""GET /debug/proxy_pool_resources (SPEC 6)."""

import pytest

from tests.factories import T0, make_pool_resource

pytestmark = pytest.mark.django_db


def test_it_shows_each_proxy_summary_as_sent(api, register_proxy, proxy_heartbeat, frozen):
    summary = make_pool_resource(extra_section={"anything": [1, "two", None]})
    register_proxy("pxy-a")
    frozen.shift(2)
    proxy_heartbeat("pxy-a", pool_resource=summary)
    frozen.shift(1)

    body = api.get("/debug/proxy_pool_resources").json()

    assert body == {
        "ok": True,
        "proxies": [{
            "proxy_id": "pxy-a",
            "is_alive": True,
            "last_seen_at": T0 + 2,
            "pool_resource_reported_at": T0 + 2,
            "pool_resource": summary,
        }],
    }


def test_it_shows_nulls_for_a_proxy_without_a_summary(api, register_proxy, frozen):
    register_proxy("pxy-a")

    (row,) = api.get("/debug/proxy_pool_resources").json()["proxies"]

    assert (row["pool_resource"], row["pool_resource_reported_at"]) == (None, None)


def test_it_includes_dead_proxies_by_default(api, register_proxy, frozen):
    register_proxy("pxy-old", pool_resource=make_pool_resource())
    frozen.shift(31)
    register_proxy("pxy-new")

    rows = api.get("/debug/proxy_pool_resources").json()["proxies"]
    alive_only = api.get("/debug/proxy_pool_resources", include_dead="no").json()["proxies"]

    assert [(row["proxy_id"], row["is_alive"]) for row in rows] == [("pxy-new", True), ("pxy-old", False)]
    assert rows[1]["pool_resource"] == make_pool_resource()
    assert [row["proxy_id"] for row in alive_only] == ["pxy-new"]


def test_it_answers_400_to_a_bad_include_dead(api, frozen):
    response = api.get("/debug/proxy_pool_resources", include_dead="2")

    assert response.status_code == 400
    assert "include_dead" in response.json()["detail"]


def test_it_does_not_shadow_the_proxy_roles_debug_views(api, frozen):
    # Both roles mount "debug/"; each set of paths must still answer.
    assert api.get("/debug/status").status_code == 200
    assert api.get("/debug/proxy_pool_resources").status_code == 200


def test_it_reads_with_one_query_however_many_proxies(api, register_proxy, frozen, django_assert_max_num_queries):
    for index in range(6):
        register_proxy(f"pxy-{index}", pool_resource=make_pool_resource())

    with django_assert_max_num_queries(1):
        assert len(api.get("/debug/proxy_pool_resources").json()["proxies"]) == 6

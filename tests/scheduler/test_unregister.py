"""POST /v1/proxy/unregister (SPEC 6, SPEC 4)."""

import pytest

from scheduler_app.models import PoolResourceSample, Proxy, ProxyStatusChange
from tests.factories import T0, make_pool_resource

pytestmark = pytest.mark.django_db


def test_it_deletes_the_proxy_and_records_a_last_change(api, register_proxy, frozen):
    register_proxy("pxy-a")
    frozen.shift(3)

    response = api.post("/v1/proxy/unregister", {"proxy_id": "pxy-a"})

    assert response.status_code == 200
    assert response.json() == {"ok": True}
    assert not Proxy.objects.exists()
    change = ProxyStatusChange.objects.order_by("-id").first()
    assert (change.proxy_id, change.old_status, change.new_status, change.at) == (
        "pxy-a", "alive", "unregistered", T0 + 3,
    )


def test_it_answers_ok_for_an_unknown_proxy_and_records_nothing(api, frozen):
    response = api.post("/v1/proxy/unregister", {"proxy_id": "pxy-unknown"})

    assert response.status_code == 200
    assert response.json() == {"ok": True}
    assert not ProxyStatusChange.objects.exists()


def test_it_drops_an_unregistered_proxy_even_from_include_dead(api, register_proxy, listed_proxies, frozen):
    register_proxy("pxy-a")
    register_proxy("pxy-b")

    api.post("/v1/proxy/unregister", {"proxy_id": "pxy-a"})

    assert set(listed_proxies(include_dead="true")) == {"pxy-b"}
    proxies = api.get("/debug/proxy_pool_resources").json()["proxies"]
    assert [row["proxy_id"] for row in proxies] == ["pxy-b"]


def test_its_next_heartbeat_gets_404(api, register_proxy, proxy_heartbeat, frozen):
    register_proxy("pxy-a")
    api.post("/v1/proxy/unregister", {"proxy_id": "pxy-a"})

    assert proxy_heartbeat("pxy-a").status_code == 404


def test_its_summary_history_stays_until_pruned(api, register_proxy, frozen):
    register_proxy("pxy-a", pool_resource=make_pool_resource())

    api.post("/v1/proxy/unregister", {"proxy_id": "pxy-a"})

    assert PoolResourceSample.objects.filter(proxy_id="pxy-a").count() == 1

"""GET /v1/proxy/history (SPEC 9): each proxy's summaries as the Scheduler stored them."""

import pytest

from scheduler_app.history import PROXY_POOLS
from tests.factories import T0, make_pool_resource

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_proxies(register_proxy, proxy_heartbeat, frozen):
    """pxy-a and pxy-b report every 5 s for two minutes; pxy-b is degraded."""
    register_proxy("pxy-a", pool_resource=make_pool_resource(cpu=0.0))
    register_proxy("pxy-b", pool_resource=make_pool_resource(cpu=100.0, admission="degraded"))
    for step in range(1, 24):
        frozen.shift(5)
        proxy_heartbeat("pxy-a", pool_resource=make_pool_resource(cpu=float(step)))
        proxy_heartbeat("pxy-b", pool_resource=make_pool_resource(cpu=100.0, admission="degraded"))


def test_it_answers_one_proxy_at_full_resolution(api, two_proxies):
    body = api.get("/v1/proxy/history", proxy_id="pxy-a", range="15m").json()
    assert (body["proxy_id"], body["range"]) == ("pxy-a", "15m")
    assert [p["cpu_avg"] for p in body["points"]] == [float(step) for step in range(24)]
    assert body["points"][0]["t"] == T0
    assert {p["pool_admission_state"] for p in body["points"]} == {"accepting"}
    assert body["resolution_s"] == 5.0  # one point per heartbeat, not the recorder's 1 s tick


def test_it_answers_minutes_from_the_rollups(api, two_proxies, frozen):
    PROXY_POOLS.fold(T0 + 125)
    points = api.get("/v1/proxy/history", proxy_id="pxy-b", range="6h").json()["points"]
    assert [(p["t"], p["cpu_avg"], p["pool_admission_state"]) for p in points] == [
        (T0, 100.0, "degraded"), (T0 + 60, 100.0, "degraded"),
    ]
    minute = api.get("/v1/proxy/history", proxy_id="pxy-a", range="6h").json()["points"][0]
    assert (minute["min"]["cpu_avg"], minute["cpu_avg"], minute["max"]["cpu_avg"]) == (0.0, 5.5, 11.0)


def test_it_answers_an_unknown_proxy_with_a_404(api, frozen):
    response = api.get("/v1/proxy/history", proxy_id="ghost", range="1h")
    assert response.status_code == 404
    assert response.json()["detail"] == {"proxy_id": ["Unknown proxy."]}


@pytest.mark.parametrize("params, field", [({"proxy_id": "pxy-a"}, "range"), ({"range": "1h"}, "proxy_id"),
                                            ({"proxy_id": "pxy-a", "range": "1d"}, "range")])
def test_it_refuses_bad_queries_with_a_400(api, register_proxy, frozen, params, field):
    register_proxy("pxy-a")
    response = api.get("/v1/proxy/history", **params)
    assert response.status_code == 400
    assert list(response.json()["detail"]) == [field]

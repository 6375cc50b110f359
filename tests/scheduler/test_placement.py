"""``POST /v1/proxy/placement`` (SPEC 14.3): which pool a request should go to, through the API on both databases."""

import pytest

from scheduler_app.placement import PoolCandidate, PoolPolicy, PoolRequest, decide
from tests.factories import T0, make_pool_resource

pytestmark = pytest.mark.django_db


def engine(saturation, *models):
    return {"saturation": saturation, "models": [{"model": m, "instances": 1, "requests_waiting_total": 0}
                                                 for m in models]}


@pytest.fixture
def pool(register_proxy, frozen):
    def _pool(proxy_id, port, saturation=None, models=("tiny",), alive=2, admission="accepting"):
        summary = make_pool_resource(alive=alive, total=alive, admission=admission, proxy_id=proxy_id,
                                     engine=None if saturation is None and not models else engine(saturation, *models))
        register_proxy(proxy_id, host="10.1.0.1", port=port, pool_resource=summary)

    return _pool


def place(api, **body):
    return api.post("/v1/proxy/placement", body)


def test_it_ranks_pools_by_saturation_then_alive_instances_with_the_gateway_header(api, pool):
    pool("busy", 8001, saturation=0.9)
    pool("small", 8002, saturation=0.2, alive=1)
    pool("big", 8003, saturation=0.2, alive=5)
    pool("blind", 8004, saturation=None)
    response = place(api, model="tiny", count=4)
    assert response.status_code == 200
    answer = response.json()
    assert [c["proxy_id"] for c in answer["candidates"]] == ["big", "small", "busy", "blind"]
    assert response["x-gateway-destination-endpoint"] == "10.1.0.1:8003,10.1.0.1:8002,10.1.0.1:8001,10.1.0.1:8004"
    assert (answer["verdict"], answer["reason"], answer["eligible"]) == ("accept", "lowest_saturation", 4)
    assert set(answer["candidates"][0]) == {"proxy_id", "host", "port", "saturation", "pool_admission_state",
                                            "summary_age_s", "reasons"}
    assert answer["candidates"][3]["reasons"] == ["no_saturation_signal"]


def test_it_leaves_out_rejecting_pools_and_pools_without_the_model(api, pool):
    pool("rejecting", 8001, saturation=0.1, admission="rejecting")
    pool("other", 8002, saturation=0.1, models=("llama",))
    pool("good", 8003, saturation=0.5)
    answer = place(api, model="tiny").json()
    assert [c["proxy_id"] for c in answer["candidates"]] == ["good"]
    assert answer["excluded"] == {"model": 1, "rejecting": 1}


def test_it_queues_when_every_pool_is_saturated_and_is_unavailable_without_one(api, pool, frozen):
    pool("a", 8001, saturation=1.0)
    assert place(api).json()["verdict"] == "queue"
    assert place(api, exclude=["a"]).status_code == 503
    frozen.shift(3600)
    response = place(api)
    assert response.status_code == 503 and response.json()["excluded"] == {"stale": 1}


@pytest.mark.parametrize("body, field", [({"count": 17}, "count"), ({"count": 0}, "count"), ({"model": 1}, "model"),
                                         ({"exclude": {"a": 1}}, "exclude")])
def test_it_refuses_bad_bodies(api, body, field):
    response = place(api, **body)
    assert response.status_code == 400 and field in response.json()["detail"]


def test_it_takes_route_and_read_tokens_only(api, pool):
    pool("a", 8001, saturation=0.1)
    for scope, status in (("route", 200), ("read", 200), ("proxy", 403), ("instance", 403)):
        response = api.post("/v1/proxy/placement", {}, HTTP_AUTHORIZATION=f"Bearer {api.token(scope)}")
        assert response.status_code == status, scope


def test_it_sheds_when_the_shed_pressure_is_at_most_a_saturated_pools():
    candidates = [PoolCandidate("a", "h", 1, last_seen_at=T0, saturation=1.0)]
    assert decide(candidates, PoolRequest(), PoolPolicy(ttl_s=30, shed_pressure=1.0), T0).verdict.value == "shed"
    assert decide(candidates, PoolRequest(), PoolPolicy(ttl_s=30), T0).verdict.value == "queue"

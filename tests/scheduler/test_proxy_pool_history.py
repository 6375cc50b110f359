"""GET /debug/proxy_pool_history: the stored summaries behind the trend charts."""

import pytest

from tests.factories import T0, make_pool_resource

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_proxies_reporting(register_proxy, proxy_heartbeat, frozen):
    """pxy-a and pxy-b each send a summary at T0+5, T0+10, T0+15 (cpu = the step)."""
    register_proxy("pxy-a")
    register_proxy("pxy-b")
    for step in (5, 10, 15):
        frozen.shift(5)
        proxy_heartbeat("pxy-a", pool_resource=make_pool_resource(cpu=float(step)))
        proxy_heartbeat("pxy-b", pool_resource=make_pool_resource(cpu=float(step) + 100, admission="degraded"))


def test_it_answers_one_proxy_samples_oldest_first(api, two_proxies_reporting):
    body = api.get("/debug/proxy_pool_history", proxy_id="pxy-a").json()

    assert body["ok"] is True
    assert body["proxy_id"] == "pxy-a"
    assert [(s["received_at"], s["cpu_avg"]) for s in body["samples"]] == [
        (T0 + 5, 5.0), (T0 + 10, 10.0), (T0 + 15, 15.0),
    ]
    assert body["samples"][0] == {
        "proxy_id": "pxy-a", "received_at": T0 + 5, "instances_alive": 2, "instances_total": 2,
        "cpu_avg": 5.0, "gpu_util_avg": 50.0, "memory_used_ratio": 0.25, "pool_admission_state": "accepting",
    }


def test_it_answers_only_samples_since_a_time(api, two_proxies_reporting):
    samples = api.get("/debug/proxy_pool_history", proxy_id="pxy-b", since=T0 + 10).json()["samples"]

    assert [(s["received_at"], s["pool_admission_state"]) for s in samples] == [
        (T0 + 10, "degraded"), (T0 + 15, "degraded"),
    ]


def test_it_keeps_the_newest_samples_within_the_limit(api, two_proxies_reporting):
    body = api.get("/debug/proxy_pool_history", proxy_id="pxy-a", limit=2).json()

    assert body["limit"] == 2
    assert [s["received_at"] for s in body["samples"]] == [T0 + 10, T0 + 15]


def test_it_answers_every_proxy_without_a_proxy_id(api, two_proxies_reporting):
    samples = api.get("/debug/proxy_pool_history").json()["samples"]

    assert len(samples) == 6
    assert {s["proxy_id"] for s in samples} == {"pxy-a", "pxy-b"}


def test_it_sends_the_whole_summary_on_request(api, two_proxies_reporting):
    plain = api.get("/debug/proxy_pool_history", proxy_id="pxy-a").json()["samples"][0]
    full = api.get("/debug/proxy_pool_history", proxy_id="pxy-a", include_summary="true").json()["samples"][0]

    assert "pool_resource" not in plain
    assert full["pool_resource"] == make_pool_resource(cpu=5.0)


def test_it_gives_null_columns_for_a_summary_without_the_figures(api, register_proxy, frozen):
    register_proxy("pxy-a", pool_resource={"custom": "shape", "instances": {"alive": "two"}})

    (sample,) = api.get("/debug/proxy_pool_history", proxy_id="pxy-a").json()["samples"]

    assert sample["instances_alive"] is None
    assert sample["cpu_avg"] is None
    assert sample["pool_admission_state"] is None


@pytest.mark.parametrize(
    "params, field",
    [({"since": "yesterday"}, "since"), ({"since": "nan"}, "since"), ({"limit": "0"}, "limit"),
     ({"limit": "many"}, "limit"), ({"limit": "10001"}, "limit"), ({"include_summary": "x"}, "include_summary")],
)
def test_it_answers_400_to_a_bad_query(api, frozen, params, field):
    response = api.get("/debug/proxy_pool_history", **params)

    assert response.status_code == 400
    body = response.json()
    assert (body["ok"], body["error"]) == (False, "validation_error")
    assert field in body["detail"]

"""Write rate limits (SPEC 10): per token and instance id, across processes, generous for 1 Hz agents."""

import pytest
from django.core.cache import caches

from controlplane.api import ratelimit
from controlplane.api.ratelimit import FLUSH_EVERY, WindowCounter
from controlplane.api.tokens import ApiToken
from tests.factories import make_snapshot

pytestmark = [pytest.mark.django_db, pytest.mark.both_entry_points]

LIMIT = 300  # the default: writes per token and instance id per minute


def snapshot_body(instance_id="i-1"):
    return {"instance_id": instance_id, "snapshot": make_snapshot()}


def bearer(secret):
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


@pytest.fixture
def agent(api, frozen):
    """An instance token and its registered instance i-1."""
    _, secret = ApiToken.objects.issue("agent", "instance")
    api.post("/v1/instance/register", {"instance_id": "i-1", "host": "h", "port": 1}, **bearer(secret))
    return secret


def test_it_stops_a_600_request_burst_from_one_token(api, agent):
    statuses = [api.post("/v1/instance/resource_snapshot", snapshot_body(), **bearer(agent)).status_code
                for _ in range(600)]
    assert statuses.count(200) == LIMIT - 1  # the register counted too
    assert set(statuses[LIMIT - 1:]) == {429}
    limited = api.post("/v1/instance/resource_snapshot", snapshot_body(), **bearer(agent))
    assert limited.json()["error"] == "rate_limited" and limited.json()["ok"] is False
    assert 1 <= int(limited["Retry-After"]) <= 60


def test_it_never_limits_an_agent_at_one_hertz(api, agent, frozen):
    for second in range(600):  # ten minutes of a snapshot a second and a heartbeat every ten
        assert api.post("/v1/instance/resource_snapshot", snapshot_body(), **bearer(agent)).status_code == 200
        if second % 10 == 0:
            assert api.post("/v1/instance/heartbeat", {"instance_id": "i-1"}, **bearer(agent)).status_code == 200
        frozen.shift(1)
    # Far below the limit, its count never left the process: not one cache operation.
    assert not caches[ratelimit.CACHE_ALIAS]._cache


def test_it_does_not_limit_another_token_or_another_instance(api, agent):
    for _ in range(LIMIT + 5):
        api.post("/v1/instance/resource_snapshot", snapshot_body(), **bearer(agent))
    assert api.post("/v1/instance/resource_snapshot", snapshot_body(), **bearer(agent)).status_code == 429
    _, other = ApiToken.objects.issue("other-agent", "instance")
    assert api.post("/v1/instance/resource_snapshot", snapshot_body(), **bearer(other)).status_code == 200
    api.post("/v1/instance/register", {"instance_id": "i-2", "host": "h", "port": 2}, **bearer(agent))
    assert api.post("/v1/instance/resource_snapshot", snapshot_body("i-2"), **bearer(agent)).status_code == 200


def test_it_lets_the_token_write_again_in_the_next_window(api, agent, frozen):
    for _ in range(LIMIT + 5):
        api.post("/v1/instance/resource_snapshot", snapshot_body(), **bearer(agent))
    frozen.shift(60)
    assert api.post("/v1/instance/resource_snapshot", snapshot_body(), **bearer(agent)).status_code == 200


def test_it_writes_nothing_on_a_429(api, agent):
    from proxy_app.models import InstanceResource

    for _ in range(LIMIT + 5):
        api.post("/v1/instance/resource_snapshot", snapshot_body(), **bearer(agent))
    before = InstanceResource.objects.values("report_seq", "cpu_util").get()
    body = snapshot_body()
    body["snapshot"] = make_snapshot(cpu=99.0)
    assert api.post("/v1/instance/resource_snapshot", body, **bearer(agent)).status_code == 429
    assert InstanceResource.objects.values("report_seq", "cpu_util").get() == before


def test_it_never_limits_reads(api, agent):
    for _ in range(LIMIT + 50):
        assert api.get("/debug/status").status_code == 200


def test_it_shares_the_count_between_processes(settings):
    """Two web processes, one shared cache: together they hit the limit, within their unflushed counts."""
    settings.FLEETWATCH_RATE_LIMIT = 100
    first, second = WindowCounter(), WindowCounter()
    allowed = 0
    for n in range(200):
        ok, _ = (first if n % 2 else second).hit("token1:i-1", 1000.0)
        allowed += ok
    assert 100 <= allowed <= 100 + 2 * max(FLUSH_EVERY, 100 * ratelimit.SHARE_FROM)
    assert caches[ratelimit.CACHE_ALIAS].get("fw-rate:token1:i-1:16") >= 100


def test_it_counts_exactly_in_one_process(settings):
    settings.FLEETWATCH_RATE_LIMIT = 25
    counter = WindowCounter()
    results = [counter.hit("k", 61.0)[0] for _ in range(30)]
    assert results == [True] * 25 + [False] * 5
    assert counter.hit("k", 61.0)[1] == 59  # seconds until the window of [60, 120) ends


def test_it_can_be_switched_off(api, agent, settings):
    settings.FLEETWATCH_RATE_LIMIT = 0
    for _ in range(LIMIT + 10):
        assert api.post("/v1/instance/resource_snapshot", snapshot_body(), **bearer(agent)).status_code == 200

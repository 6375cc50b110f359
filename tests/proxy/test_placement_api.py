"""``POST /v1/placement`` and ``POST /v1/placement/feedback`` through the API (SPEC 14.1, 14.2), on both databases."""

import pytest

from controlplane.api.tokens import ApiToken
from proxy_app.models import InstanceStatusChange
from proxy_app.tasks import sweep_fences
from tests.factories import T0_MS, make_engine, make_failed_engine, make_gpu, make_snapshot

pytestmark = [pytest.mark.django_db, pytest.mark.both_entry_points]


@pytest.fixture
def serving(register_instance, report, frozen):
    """Register and report instances serving ``tiny``: ``serving("a", waiting=2, ...)``."""

    def _serving(instance_id, host="10.0.0.1", port=8000, waiting=0, kv=0.1, engine=None, gpus=(), **snapshot):
        register_instance(instance_id, host=host, port=port)
        engines = [engine if engine is not None else make_engine(requests_waiting=waiting, kv_cache_usage_ratio=kv,
                                                                  scraped_at_ms=T0_MS)]
        response = report(instance_id, make_snapshot(gpus=list(gpus), engines=engines, **snapshot))
        assert response.status_code == 200, response.content

    return _serving


def place(api, **body):
    return api.post("/v1/placement", body)


def test_it_answers_the_least_pressed_instance_first_with_the_gateway_header(api, serving):
    serving("busy", host="10.0.0.1", waiting=4)
    serving("idle", host="10.0.0.2", waiting=0, kv=0.0)
    serving("kv", host="10.0.0.3", waiting=0, kv=0.6)
    response = place(api, model="tiny")
    assert response.status_code == 200
    answer = response.json()
    assert [c["instance_id"] for c in answer["candidates"]] == ["idle", "kv", "busy"]
    assert [c["pressure"] for c in answer["candidates"]] == [0.0, 0.75, 0.8]
    assert response["x-gateway-destination-endpoint"] == "10.0.0.2:8000,10.0.0.3:8000,10.0.0.1:8000"
    assert answer["ok"] is True and answer["verdict"] == "accept" and answer["reason"] == "lowest_pressure"
    assert (answer["considered"], answer["eligible"], answer["excluded"]) == (3, 3, {})
    first = answer["candidates"][0]
    assert set(first) == {"instance_id", "host", "port", "endpoints", "pressure", "requests_waiting",
                          "requests_running", "kv_cache_usage_ratio", "signal_age_s", "reasons",
                          "prefix_hit_blocks", "prefix_hit_tokens"}
    assert (first["prefix_hit_blocks"], first["prefix_hit_tokens"]) == (0, 0)
    assert (answer["prompt_blocks"], answer["prefix_source"]) == (None, None)
    assert first["signal_age_s"] == 0.0 and first["reasons"] == ["pressure_from_queue"]


def test_it_queues_when_saturated_and_sheds_with_retry_after(api, serving):
    serving("a", waiting=6)
    response = place(api)
    assert response.status_code == 200 and response.json()["verdict"] == "queue"
    serving("a", waiting=40)
    response = place(api)
    assert response.status_code == 429 and response["Retry-After"] == "1"
    assert response.json()["ok"] is False and response.json()["candidates"] == []
    assert "x-gateway-destination-endpoint" not in response


def test_it_is_unavailable_without_an_eligible_instance(api, serving):
    serving("a")
    response = place(api, model="other")
    assert response.status_code == 503
    assert response.json()["verdict"] == "unavailable" and response.json()["excluded"] == {"model": 1}


def test_it_keeps_out_rejecting_instances_and_gpus_in_error(api, serving, listed_instances):
    serving("rejecting", admission="rejecting")
    serving("broken", gpus=[make_gpu(health="error")])
    serving("good")
    answer = place(api).json()
    assert [c["instance_id"] for c in answer["candidates"]] == ["good"]
    # A GPU in error fences its instance at once (SPEC 14.2), before the gpu_error rule is reached.
    assert answer["excluded"] == {"fenced": 1, "rejecting": 1}
    assert (listed_instances()["broken"]["fenced"], listed_instances()["broken"]["fence_reason"]) == (True, "gpu_error")


def test_it_matches_a_running_lora_or_a_capability_adapter(api, serving, register_instance, report):
    serving("lora", engine=make_engine(scraped_at_ms=T0_MS, lora={"max": 2, "running": ["sql"], "waiting": []}))
    serving("plain")
    assert [c["instance_id"] for c in place(api, adapter="sql").json()["candidates"]] == ["lora"]


def test_it_keeps_a_session_key_on_its_instance(api, serving):
    for n in range(4):
        serving(f"i-{n}", host=f"10.0.0.{n + 1}")
    first = place(api, session_key="user-1", count=1).json()
    again = place(api, session_key="user-1", count=1).json()
    assert first["candidates"][0]["instance_id"] == again["candidates"][0]["instance_id"]
    assert first["reason"] == "session_affinity"


@pytest.mark.parametrize("body, field", [
    ({"count": 0}, "count"), ({"count": 33}, "count"), ({"count": True}, "count"), ({"count": 2.5}, "count"),
    ({"prompt_tokens": -1}, "prompt_tokens"), ({"max_tokens": "nine"}, "max_tokens"), ({"model": 7}, "model"),
    ({"session_key": "k" * 257}, "session_key"), ({"exclude": "a"}, "exclude"),
    ({"exclude": [f"i-{n}" for n in range(65)]}, "exclude"), ({"exclude": [1]}, "exclude[0]"),
])
def test_it_refuses_bad_bodies_with_a_validation_error(api, serving, body, field):
    serving("a")
    response = place(api, **body)
    assert response.status_code == 400
    assert response.json()["error"] == "validation_error" and field in response.json()["detail"]


def test_it_takes_route_and_read_tokens_but_not_instance_tokens(api, serving):
    serving("a")
    for scope, status in (("route", 200), ("read", 200), ("instance", 403), ("proxy", 403)):
        token = api.token(scope)
        assert api.post("/v1/placement", {}, HTTP_AUTHORIZATION=f"Bearer {token}").status_code == status, scope
    assert api.as_anonymous().post("/v1/placement", {}).status_code == 401


def test_it_is_never_rate_limited(api, serving, settings):
    settings.FLEETWATCH_RATE_LIMIT = 2
    serving("a")
    assert {place(api).status_code for _ in range(10)} == {200}


def feedback(api, instance_id, outcome, status_code=None):
    return api.post("/v1/placement/feedback", {"instance_id": instance_id, "outcome": outcome,
                                               "status_code": status_code})


def test_three_error_outcomes_fence_an_instance_until_it_recovers(api, serving, frozen, listed_instances):
    serving("a", host="10.0.0.1")
    serving("b", host="10.0.0.2", waiting=3)
    assert feedback(api, "a", "error", 502).json() == {"ok": True, "fenced": False}
    assert feedback(api, "a", "timeout").json() == {"ok": True, "fenced": False}
    assert feedback(api, "a", "refused").json() == {"ok": True, "fenced": True}
    answer = place(api).json()
    assert [c["instance_id"] for c in answer["candidates"]] == ["b"] and answer["excluded"] == {"fenced": 1}
    row = listed_instances()["a"]
    assert (row["fenced"], row["fence_reason"]) == (True, "router_refused")
    change = InstanceStatusChange.objects.filter(instance_id="a").order_by("-at", "-id").first()
    assert (change.new_status, change.reason) == ("fenced", "router_refused")
    # Clean reports for 10 s, and no new error: it comes back.
    for _ in range(11):
        frozen.shift(1)
        serving("a", host="10.0.0.1")
        sweep_fences()
    assert listed_instances()["a"]["fenced"] is False
    assert place(api).json()["candidates"][0]["instance_id"] == "a"
    change = InstanceStatusChange.objects.filter(instance_id="a").order_by("-at", "-id").first()
    assert (change.old_status, change.new_status, change.reason) == ("fenced", "unfenced", "recovered_after_10s")


def test_an_engine_that_goes_down_fences_its_instance_at_once(api, serving, listed_instances, frozen):
    serving("a")
    serving("b", waiting=3)
    sweep_fences()  # a fence tick saw its ok engine
    serving("a", engine=make_failed_engine("unreachable", scraped_at_ms=T0_MS))
    assert [c["instance_id"] for c in place(api).json()["candidates"]] == ["b"]
    assert (listed_instances()["a"]["fenced"], listed_instances()["a"]["fence_reason"]) == (True, "engine_unreachable")
    sweep_fences()
    change = InstanceStatusChange.objects.filter(instance_id="a", new_status="fenced").get()
    assert change.reason == "engine_unreachable"
    # One good report does not readmit it.
    frozen.shift(1)
    serving("a")
    sweep_fences()
    assert [c["instance_id"] for c in place(api).json()["candidates"]] == ["b"]


def test_an_engine_down_100_ms_after_its_first_ok_report_fences_at_once_without_the_recorder(
        api, serving, listed_instances, frozen):
    """"Had an ok engine" is known from the report itself, whatever the recorder's timing (SPEC 14.2)."""
    serving("a")
    frozen.shift(0.1)
    serving("a", engine=make_failed_engine("unreachable", scraped_at_ms=T0_MS + 100))
    assert (listed_instances()["a"]["fenced"], listed_instances()["a"]["fence_reason"]) == (True, "engine_unreachable")
    response = place(api)
    assert response.status_code == 503
    assert response.json()["verdict"] == "unavailable" and response.json()["excluded"] == {"fenced": 1}


def test_a_fence_row_names_the_status_the_instance_had_when_it_was_fenced(api, serving, frozen):
    serving("a")
    frozen.shift(16)  # past the alive window (1.5 heartbeat intervals of 10 s), within the TTL: suspect
    for outcome in ("error", "error", "error"):
        feedback(api, "a", outcome)
    change = InstanceStatusChange.objects.filter(instance_id="a", new_status="fenced").get()
    assert (change.old_status, change.reason) == ("suspect", "router_error")


def test_feedback_for_an_unknown_instance_is_a_compat_200(api):
    response = feedback(api, "nobody", "error")
    assert response.status_code == 200 and response.json() == {"ok": False, "error": "unknown_instance"}


@pytest.mark.parametrize("body", [{"instance_id": "a", "outcome": "bad"}, {"outcome": "ok"},
                                  {"instance_id": "a", "outcome": "ok", "status_code": 99}])
def test_feedback_refuses_bad_bodies(api, serving, body):
    serving("a")
    response = api.post("/v1/placement/feedback", body)
    assert response.status_code == 400 and response.json()["error"] == "validation_error"


def test_feedback_needs_a_route_token(api, serving):
    serving("a")
    token = api.token("read")
    response = api.post("/v1/placement/feedback", {"instance_id": "a", "outcome": "ok"},
                        HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 403
    assert ApiToken.objects.filter(scope="route").exists()


def test_it_matches_the_model_and_adapters_the_capabilities_declare(api, register_instance, report, frozen, settings):
    from tests.factories import make_capabilities

    settings.FLEETWATCH_PLACEMENT_REFRESH_S = 0.25  # the board's own refreshes: capabilities read by fingerprint
    register_instance("declared", capabilities=make_capabilities())
    register_instance("plain")
    for name in ("declared", "plain"):
        assert report(name, make_snapshot(gpus=[make_gpu()])).status_code == 200
    answer = place(api, model="meta-llama/Llama-3.1-8B-Instruct", adapter="sql-lora").json()
    assert [c["instance_id"] for c in answer["candidates"]] == ["declared"]
    assert answer["excluded"] == {"model": 1}
    # New capabilities (another fingerprint) are read at the next refresh.
    register_instance("plain", capabilities=make_capabilities(model={"identifier": "other", "revision": None}))
    frozen.shift(0.3)
    assert [c["instance_id"] for c in place(api, model="other").json()["candidates"]] == ["plain"]

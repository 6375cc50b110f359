"""``GET /v1/placement/endpoint``: ``POST /v1/placement`` in the shape nginx's auth_request takes (docs/placement.md)."""

import pytest

from tests.factories import T0_MS, make_engine, make_snapshot

pytestmark = pytest.mark.django_db

ENDPOINT = "/v1/placement/endpoint"


@pytest.fixture
def serving(register_instance, report, frozen):
    """Register and report an instance serving ``tiny``: ``serving("a", waiting=2)``."""

    def _serving(instance_id, host="10.0.0.1", port=8000, waiting=0, kv=0.1):
        register_instance(instance_id, host=host, port=port)
        engine = make_engine(requests_waiting=waiting, kv_cache_usage_ratio=kv, scraped_at_ms=T0_MS)
        assert report(instance_id, make_snapshot(engines=[engine])).status_code == 200

    return _serving


def test_it_answers_the_first_candidate_of_the_post_in_the_gateway_header(api, serving):
    serving("busy", host="10.0.0.1", waiting=4)
    serving("idle", host="10.0.0.2", waiting=0, kv=0.0)
    response = api.get(ENDPOINT, model="tiny")
    assert response.status_code == 200
    assert response["x-gateway-destination-endpoint"] == "10.0.0.2:8000"
    assert response["x-fleetwatch-verdict"] == "accept"
    # The POST's answer; each placement counts as pending on its instance until the next report.
    answer, posted = response.json(), api.post("/v1/placement", {"model": "tiny", "count": 1}).json()
    assert set(answer) == set(posted) and set(answer["candidates"][0]) == set(posted["candidates"][0])
    assert [c["instance_id"] for c in answer["candidates"]] == [c["instance_id"] for c in posted["candidates"]]
    assert (answer["candidates"][0]["pressure"], posted["candidates"][0]["pressure"]) == (0.0, 0.2)


def test_it_reads_the_fields_from_headers_and_lets_the_query_win(api, serving):
    serving("a", host="10.0.0.1")
    serving("b", host="10.0.0.2")
    by_header = api.get(ENDPOINT, HTTP_X_FLEETWATCH_SESSION_KEY="user-7", HTTP_X_FLEETWATCH_MODEL="tiny",
                        HTTP_X_FLEETWATCH_PROMPT_TOKENS="100", HTTP_X_FLEETWATCH_MAX_TOKENS="20")
    posted = api.post("/v1/placement", {"session_key": "user-7", "model": "tiny", "prompt_tokens": 100,
                                        "max_tokens": 20, "count": 1})
    assert [c["instance_id"] for c in by_header.json()["candidates"]] == \
        [c["instance_id"] for c in posted.json()["candidates"]]
    assert by_header.json()["reason"] == "session_affinity"
    assert api.get(ENDPOINT, model="other", HTTP_X_FLEETWATCH_MODEL="tiny").json()["excluded"] == {"model": 2}


def test_it_takes_count_and_repeated_excludes_from_the_query(api, serving):
    serving("a", host="10.0.0.1", waiting=0)
    serving("b", host="10.0.0.2", waiting=1)
    serving("c", host="10.0.0.3", waiting=2)
    assert api.get(ENDPOINT, count=3)["x-gateway-destination-endpoint"] == "10.0.0.1:8000,10.0.0.2:8000,10.0.0.3:8000"
    answer = api.get(ENDPOINT, count=3, exclude=["a", "b"])
    assert answer["x-gateway-destination-endpoint"] == "10.0.0.3:8000"
    assert answer.json()["excluded"] == {"excluded": 2}


def test_it_refuses_shed_and_unavailable_with_a_403_naming_the_verdict(api, serving):
    serving("a", waiting=40)
    shed = api.get(ENDPOINT)
    assert (shed.status_code, shed["x-fleetwatch-verdict"], shed["Retry-After"]) == (403, "shed", "1")
    assert shed.json()["verdict"] == "shed" and "x-gateway-destination-endpoint" not in shed
    unavailable = api.get(ENDPOINT, model="other")
    assert (unavailable.status_code, unavailable["x-fleetwatch-verdict"]) == (403, "unavailable")
    assert unavailable.json()["ok"] is False


def test_it_answers_queue_as_a_200(api, serving):
    serving("a", waiting=6)
    response = api.get(ENDPOINT)
    assert (response.status_code, response["x-fleetwatch-verdict"]) == (200, "queue")


@pytest.mark.parametrize("params", [
    {"count": "0"}, {"count": "33"}, {"count": "two"}, {"prompt_tokens": "-1"}, {"max_tokens": "1.5"},
    {"model": "m" * 256}, {"HTTP_X_FLEETWATCH_SESSION_KEY": "k" * 257}, {"HTTP_X_FLEETWATCH_PROMPT_TOKENS": "many"},
    {"exclude": ["x"] * 65}, {"model": ""}, {"HTTP_X_FLEETWATCH_ADAPTER": ""}, {"exclude": [""]},
])
def test_it_refuses_bad_parameters_with_the_envelope(api, params):
    response = api.get(ENDPOINT, **params)
    assert response.status_code == 400
    assert response.json()["ok"] is False and response.json()["error"] == "validation_error"
    assert response["x-fleetwatch-verdict"] == "invalid"


def test_it_names_the_first_candidate_in_a_header_safe_inside_a_json_string(api, register_instance, report, frozen):
    register_instance('gpu "ü"\\1', host="10.0.0.1")
    assert report('gpu "ü"\\1', make_snapshot(engines=[make_engine(scraped_at_ms=T0_MS)])).status_code == 200
    assert api.get(ENDPOINT)["x-fleetwatch-instance-id"] == 'gpu \\"\\u00fc\\"\\\\1'


def test_it_takes_route_and_read_tokens_only(api, serving):
    serving("a")
    for scope in ("route", "read"):
        assert api.get(ENDPOINT, HTTP_AUTHORIZATION=f"Bearer {api.token(scope)}").status_code == 200
    for scope in ("instance", "proxy"):
        refused = api.get(ENDPOINT, HTTP_AUTHORIZATION=f"Bearer {api.token(scope)}")
        assert (refused.status_code, refused.json()["error"]) == (403, "forbidden")
        assert refused.json()["detail"] == {"scope": [f"Needs a token of scope route or read; this one's scope is {scope}."]}
        assert "x-fleetwatch-verdict" not in refused
    anonymous = api.as_anonymous().get(ENDPOINT)
    assert (anonymous.status_code, anonymous["WWW-Authenticate"]) == (401, "Bearer")


def test_it_serves_only_get(api):
    response = api.post(ENDPOINT, {})
    assert (response.status_code, response["Allow"]) == (405, "GET")


def test_it_is_never_rate_limited(api, serving, settings):
    settings.FLEETWATCH_RATE_LIMIT = 2
    serving("a")
    assert {api.get(ENDPOINT).status_code for _ in range(10)} == {200}

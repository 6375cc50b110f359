"""The route lane's gate through the API (issue 30, item 2): past its share of a web process, placement and
feedback get a 429 ``route_busy`` with ``Retry-After`` while the agents' reports are answered; an unknown
instance's feedback is read only. On both entry points and both databases."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from controlplane.api import route_gate
from tests.factories import make_snapshot

pytestmark = [pytest.mark.django_db, pytest.mark.both_entry_points]


@pytest.fixture
def full_lane(settings):
    """This process's route lane with its share spent: it refills in 50 s, longer than any test."""
    settings.FLEETWATCH_ROUTE_SHARE = 0.001
    lane = route_gate.gate()
    lane.tokens = -lane.burst_s
    return lane


def test_it_refuses_placement_past_the_share_and_still_takes_reports(api, register_instance, full_lane):
    register_instance("i-1")
    response = api.post("/v1/placement", {"model": "tiny"})
    assert response.status_code == 429
    wait = response["Retry-After"]
    assert wait in {"1", "2", "3"}  # in turn, so that routers refused together do not come back together
    assert response.json() == {"ok": False, "error": "route_busy", "detail": {
        "body": [f"Too many placement and feedback requests at once; retry in {wait} s."]}}
    report = api.post("/v1/instance/resource_snapshot", {"instance_id": "i-1", "snapshot": make_snapshot()})
    assert report.status_code == 200 and report.json() == {"ok": True}
    feedback = api.post("/v1/placement/feedback", {"instance_id": "i-1", "outcome": "error"})
    assert (feedback.status_code, feedback.json()["error"]) == (429, "route_busy")
    assert {feedback["Retry-After"], api.post("/v1/placement", {})["Retry-After"]} <= {"1", "2", "3"}


def test_it_refuses_nginx_a_shed_it_can_pass_on(api, full_lane):
    response = api.get("/v1/placement/endpoint")
    assert response.status_code == 403  # nginx's auth_request turns any other refusal into a 500
    assert response["x-fleetwatch-verdict"] == "shed" and response["Retry-After"] in {"1", "2", "3"}
    assert response.json()["error"] == "route_busy"


def test_it_checks_the_token_before_the_lane_and_the_fields_after(api, full_lane):
    assert api.as_anonymous().post("/v1/placement", {}).status_code == 401
    assert api.post("/v1/placement", raw="{").status_code == 400  # the JSON is read before, its fields after
    assert api.post("/v1/placement", {"count": 0}).status_code == 429


def test_it_admits_again_once_the_bucket_refilled(api, register_instance, full_lane):
    register_instance("i-1")
    assert api.post("/v1/placement", {}).status_code == 429
    full_lane.tokens = full_lane.burst_s
    assert api.post("/v1/placement", {}).json()["verdict"] == "accept"


@pytest.mark.parametrize("outcome", ["error", "timeout", "refused", "ok"])
def test_it_answers_an_unknown_instances_feedback_without_a_write(api, outcome):
    """A flood of feedback for ids this Proxy does not know takes no write lock from the reports (issue 30)."""
    api.post("/v1/placement/feedback", {"instance_id": "warm-up", "outcome": "ok"})  # the token's first use
    with CaptureQueriesContext(connection) as queries:
        response = api.post("/v1/placement/feedback", {"instance_id": "nobody", "outcome": outcome})
    assert response.json() == {"ok": False, "error": "unknown_instance"}
    statements = [query["sql"].split()[0].upper() for query in queries.captured_queries]
    # No transaction (no SAVEPOINT inside the test's own), no lock, no write: nothing takes SQLite's writer lock.
    assert set(statements) <= {"SELECT"}, queries.captured_queries
    assert not any("FOR UPDATE" in query["sql"].upper() for query in queries.captured_queries)


def test_it_writes_an_ok_feedback_only_when_errors_were_counted(api, register_instance):
    register_instance("i-1")
    api.post("/v1/placement/feedback", {"instance_id": "i-1", "outcome": "ok"})
    with CaptureQueriesContext(connection) as queries:
        assert api.post("/v1/placement/feedback", {"instance_id": "i-1", "outcome": "ok"}).json()["fenced"] is False
    assert {query["sql"].split()[0].upper() for query in queries.captured_queries} == {"SELECT"}
    api.post("/v1/placement/feedback", {"instance_id": "i-1", "outcome": "error"})
    with CaptureQueriesContext(connection) as queries:
        api.post("/v1/placement/feedback", {"instance_id": "i-1", "outcome": "ok"})
    assert "UPDATE" in {query["sql"].split()[0].upper() for query in queries.captured_queries}

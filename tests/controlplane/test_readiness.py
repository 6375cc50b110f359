"""GET /readyz: 200 when the database answers, every migration is applied and, on a Proxy,
the recorder and the link are at work; else 503 naming what failed.

The database outage itself is in tests/system/test_readiness.py (a real
PostgreSQL behind a TCP proxy that the test stops and starts again).
"""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from proxy_app.models import PoolResource, SchedulerLinkState
from proxy_app.pool.summary import proxy_id
from tests.factories import T0
from tests.migration_graph import newest_and_parent

pytestmark = pytest.mark.django_db


def at_work(now, *, link_attempt_age_s=1.0, failures=0):
    """What a running recorder and link leave behind, as of ``now``."""
    PoolResource.objects.create(t=now - 1, summary={})
    SchedulerLinkState.objects.create(proxy_id=proxy_id(), scheduler_url="http://127.0.0.1:8000",
                                      registered=failures == 0, heartbeat_interval_s=5.0,
                                      last_attempt_at=now - link_attempt_age_s, consecutive_failures=failures,
                                      last_error="connection refused" if failures else "")


def test_it_is_ready_when_everything_is_at_work(api, frozen):
    at_work(T0)
    response = api.as_anonymous().get("/readyz")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["ok"] is True and body["failed"] == []
    assert set(body["checks"]) == {"database", "migrations", "recorder", "link"}
    assert body["checks"]["migrations"] == {"ok": True, "unapplied": []}
    assert body["checks"]["recorder"] == {"ok": True, "last_record_age_s": 1.0}


def test_a_proxy_whose_recorder_never_ran_is_not_ready(api, frozen):
    response = api.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["ok"] is False
    assert body["failed"] == ["recorder", "link"]
    assert body["checks"]["database"]["ok"] is True


def test_a_recorder_that_stopped_writing_fails_after_a_few_intervals(api, frozen):
    at_work(T0)
    frozen.shift(5)
    assert api.get("/readyz").status_code == 200
    frozen.shift(10)
    body = api.get("/readyz").json()
    assert body["failed"] == ["recorder"]
    assert body["checks"]["recorder"]["last_record_age_s"] == 16.0


def test_a_link_that_runs_but_cannot_reach_the_scheduler_is_ready_and_says_so(api, frozen):
    at_work(T0, failures=4)
    body = api.get("/readyz").json()
    assert body["ok"] is True
    assert body["checks"]["link"] == {"ok": True, "last_attempt_age_s": 1.0, "registered": False,
                                      "consecutive_failures": 4, "last_error": "connection refused"}


def test_a_link_that_stopped_trying_is_not_ready(api, frozen):
    at_work(T0, link_attempt_age_s=60)
    body = api.get("/readyz").json()
    assert body["failed"] == ["link"]
    assert "60 s old" in body["checks"]["link"]["error"]


def test_a_scheduler_only_process_checks_the_database_and_its_migrations(api, settings):
    settings.FLEETWATCH_ROLES = ["scheduler"]
    body = api.get("/readyz").json()
    assert body["ok"] is True
    assert set(body["checks"]) == {"database", "migrations"}


@pytest.fixture
def scheduler_one_step_back():
    """scheduler_app's newest migration unapplied (its name is yielded); every migration applied again afterwards."""
    newest, parent = newest_and_parent("scheduler_app")
    executor = MigrationExecutor(connection)
    executor.migrate([("scheduler_app", parent)])
    yield newest
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_an_unapplied_migration_makes_it_not_ready_and_is_named(api, settings, scheduler_one_step_back):
    settings.FLEETWATCH_ROLES = ["scheduler"]
    response = api.get("/readyz")
    assert response.status_code == 503
    assert response.json()["failed"] == ["migrations"]
    assert response.json()["checks"]["migrations"]["unapplied"] == [f"scheduler_app.{scheduler_one_step_back}"]

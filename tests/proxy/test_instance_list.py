"""GET /v1/instance/list (SPEC 3, 4)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agent.capabilities import fingerprint, full_view, parse_capabilities
from tests.factories import T0, make_capabilities

pytestmark = pytest.mark.django_db

ROW_KEYS = {
    "instance_id", "host", "port", "endpoints", "tags", "weight", "meta", "capabilities", "capability_fingerprint",
    "registered_at", "last_seen_at", "status", "is_alive", "load", "fenced", "fence_reason", "resource",
}


def test_it_answers_a_bare_array_of_rows(api, register_instance, frozen):
    register_instance("i-1", host="10.0.0.1", port=8000, endpoints=["/v1"], tags=["a"], weight=2.0, meta={"m": 1},
             capabilities=make_capabilities())
    response = api.get("/v1/instance/list")
    assert response.status_code == 200
    rows = response.json()
    assert isinstance(rows, list)
    assert len(rows) == 1
    row = rows[0]
    assert set(row) == ROW_KEYS
    assert row["instance_id"] == "i-1"
    assert row["host"] == "10.0.0.1"
    assert row["port"] == 8000
    assert row["endpoints"] == ["/v1"]
    assert row["tags"] == ["a"]
    assert row["weight"] == 2.0
    assert row["meta"] == {"m": 1}
    assert row["capabilities"] == full_view(parse_capabilities(make_capabilities()))
    assert row["capability_fingerprint"] == fingerprint(parse_capabilities(make_capabilities()))
    assert row["registered_at"] == T0
    assert row["last_seen_at"] == T0
    assert row["status"] == "alive"
    assert row["is_alive"] is True
    assert row["load"] == {"inflight": None, "qps_1m": None, "gpu_util": None}


def test_it_answers_an_empty_array_for_an_empty_pool(api, frozen):
    assert api.get("/v1/instance/list").json() == []


def test_it_orders_rows_by_instance_id(api, register_instance, frozen):
    for instance_id in ("i-c", "i-a", "i-b"):
        register_instance(instance_id)
    assert [row["instance_id"] for row in api.get("/v1/instance/list").json()] == ["i-a", "i-b", "i-c"]


def test_it_leaves_out_stale_instances_by_default(register_instance, frozen, listed_instances):
    register_instance("i-old")
    frozen.shift(31)
    register_instance("i-new")
    assert set(listed_instances()) == {"i-new"}
    assert set(listed_instances(include_dead="false")) == {"i-new"}


@pytest.mark.parametrize("word", ["true", "TRUE", "1", "yes", "On"])
def test_it_shows_stale_instances_with_include_dead(register_instance, frozen, listed_instances, word):
    register_instance("i-old")
    frozen.shift(31)
    register_instance("i-new")
    rows = listed_instances(include_dead=word)
    assert set(rows) == {"i-old", "i-new"}
    assert rows["i-old"]["is_alive"] is False
    assert rows["i-old"]["status"] == "stale"


@pytest.mark.parametrize(
    ("age", "status", "alive"),
    [(0, "alive", True), (15, "alive", True), (16, "suspect", True), (30, "suspect", True), (31, "stale", False)],
)
def test_it_computes_status_and_is_alive_from_last_seen_at_read_time(register_instance, frozen, listed_instances, age, status, alive):
    register_instance("i-1")
    frozen.shift(age)
    row = listed_instances(include_dead="true")["i-1"]
    assert row["status"] == status
    assert row["is_alive"] is alive


def test_it_shows_a_dead_entry_as_dead_before_any_sweep(register_instance, frozen, listed_instances):
    register_instance("i-1")
    frozen.shift(31)
    row = listed_instances(include_dead="true")["i-1"]
    # The stored status is still "alive" (no sweeper ran); reads go by the clock.
    assert row["is_alive"] is False
    assert row["status"] == "stale"


def test_it_follows_the_ttl_setting(settings, register_instance, frozen, listed_instances):
    settings.FLEETWATCH_INSTANCE_TTL_S = 9
    register_instance("i-1")
    frozen.shift(4)
    assert listed_instances()["i-1"]["status"] == "alive"
    frozen.shift(1)
    assert listed_instances()["i-1"]["status"] == "suspect"
    frozen.shift(5)
    assert "i-1" not in listed_instances()


# --- paging -----------------------------------------------------------------------------

@pytest.fixture
def five(register_instance, frozen):
    for n in range(5):
        register_instance(f"i-{n}")


def test_it_pages_with_limit_and_offset(api, five):
    response = api.get("/v1/instance/list", limit=2, offset=1)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"count", "limit", "offset", "results"}
    assert body["count"] == 5
    assert body["limit"] == 2
    assert body["offset"] == 1
    assert [row["instance_id"] for row in body["results"]] == ["i-1", "i-2"]
    assert set(body["results"][0]) == ROW_KEYS


def test_it_pages_from_the_start_with_limit_only(api, five):
    body = api.get("/v1/instance/list", limit=3).json()
    assert body["offset"] == 0
    assert [row["instance_id"] for row in body["results"]] == ["i-0", "i-1", "i-2"]


def test_it_pages_to_the_end_with_offset_only(api, five):
    body = api.get("/v1/instance/list", offset=3).json()
    assert body["count"] == 5
    assert body["limit"] is None
    assert [row["instance_id"] for row in body["results"]] == ["i-3", "i-4"]


def test_it_answers_an_empty_page_past_the_end(api, five):
    body = api.get("/v1/instance/list", limit=2, offset=10).json()
    assert body["count"] == 5
    assert body["results"] == []


def test_it_counts_only_what_include_dead_shows(api, register_instance, frozen):
    register_instance("i-old")
    frozen.shift(31)
    register_instance("i-new")
    assert api.get("/v1/instance/list", limit=10).json()["count"] == 1
    assert api.get("/v1/instance/list", limit=10, include_dead="true").json()["count"] == 2


def test_it_lists_without_a_query_per_row(api, register_instance, report, instance_heartbeat, frozen):
    def queries(**params):
        with CaptureQueriesContext(connection) as captured:
            assert api.get("/v1/instance/list", **params).status_code == 200
        return len(captured)

    register_instance("i-00")
    report("i-00")
    one, one_paged = queries(), queries(limit=10)
    for n in range(1, 30):
        register_instance(f"i-{n:02}")
        instance_heartbeat(f"i-{n:02}", inflight=n)
        if n % 2:
            report(f"i-{n:02}")
    assert queries() == one
    assert queries(include_dead="true") == one
    assert queries(limit=10) == one_paged


def test_it_lists_in_one_query(api, register_instance, report, frozen, django_assert_max_num_queries):
    for n in range(10):
        register_instance(f"i-{n}")
        report(f"i-{n}")
    with django_assert_max_num_queries(1):
        assert len(api.get("/v1/instance/list").json()) == 10
    with django_assert_max_num_queries(2):
        assert len(api.get("/v1/instance/list", limit=5).json()["results"]) == 5

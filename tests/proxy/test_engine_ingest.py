"""A snapshot's ``engines`` through the HTTP API (SPEC 13): list rows, the pool summary's ``engine``
section, and the series; on both databases."""

import pytest

from proxy_app.ops.history import record_instances, record_pool
from tests.factories import T0, make_engine, make_failed_engine, make_snapshot

pytestmark = pytest.mark.django_db

ENGINE_COLUMNS = ("engine_count", "engine_ok_count", "engine_status", "engine_models", "requests_running",
                  "requests_waiting", "kv_cache_usage_ratio", "kv_cache_capacity_tokens", "ttft_p95_s",
                  "engine_sample_age_ms")


def engine_host(register_instance, report, instance_id, *engines, seq=1):
    register_instance(instance_id)
    response = report(instance_id, make_snapshot(engines=list(engines)), seq=seq)
    assert response.status_code == 200, response.content


def pool_engine(api):
    response = api.get("/debug/pool_resource")
    assert response.status_code == 200, response.content
    return response.json()["pool_resource"]


def test_a_list_row_carries_the_engine_columns(register_instance, report, listed_instances, frozen):
    engine_host(register_instance, report, "i-1",
                make_engine(engine_index="0", requests_waiting=3, requests_running=4, kv_cache_usage_ratio=0.5),
                make_engine(engine_index="1", requests_waiting=5, requests_running=2, kv_cache_usage_ratio=0.75,
                            ttft_p95_s=1.5))
    resource = listed_instances()["i-1"]["resource"]
    assert {name: resource[name] for name in ENGINE_COLUMNS} == {
        "engine_count": 2, "engine_ok_count": 2, "engine_status": "ok", "engine_models": ["tiny"],
        "requests_running": 6, "requests_waiting": 8, "kv_cache_usage_ratio": 0.75,
        "kv_cache_capacity_tokens": 8192, "ttft_p95_s": 1.5, "engine_sample_age_ms": 300,
    }
    # The snapshot as sent keeps every engine object.
    assert [engine["engine_index"] for engine in resource["raw_resource"]["engines"]] == ["0", "1"]


def test_a_failed_scrape_gives_its_status_and_nulls_never_the_previous_figures(
        register_instance, report, listed_instances, frozen):
    engine_host(register_instance, report, "i-1", make_engine(requests_waiting=40))
    assert listed_instances()["i-1"]["resource"]["requests_waiting"] == 40
    frozen.shift(1)
    assert report("i-1", make_snapshot(engines=[make_failed_engine("timeout")]), seq=2).status_code == 200
    resource = listed_instances()["i-1"]["resource"]
    assert (resource["engine_count"], resource["engine_ok_count"], resource["engine_status"]) == (1, 0, "timeout")
    assert resource["requests_waiting"] is None and resource["kv_cache_usage_ratio"] is None
    assert resource["engine_models"] == []


def test_a_host_without_engines_has_null_engine_columns(register_instance, report, listed_instances, frozen):
    register_instance("i-1")
    report("i-1", make_snapshot())
    resource = listed_instances()["i-1"]["resource"]
    assert all(resource[name] is None for name in ENGINE_COLUMNS)


@pytest.mark.parametrize("garbage", [
    "engines", {"a": 1}, [1, "x", None], [{"status": "ok", "requests_waiting": "many", "kv_cache_usage_ratio": 7}],
    [{"status": "ok", "requests_waiting": 1e300, "model": ["x"], "scraped_at_ms": "soon"}],
])
def test_garbage_engines_are_read_defensively_and_never_refuse_the_report(
        register_instance, report, listed_instances, frozen, garbage):
    register_instance("i-1")
    response = report("i-1", make_snapshot(engines=garbage))
    assert response.status_code == 200, response.content
    resource = listed_instances()["i-1"]["resource"]
    assert resource["requests_waiting"] is None and resource["kv_cache_usage_ratio"] is None


def test_the_pool_summary_sums_queues_and_grades_engines_over_alive_instances(
        api, register_instance, report, frozen, settings):
    settings.FLEETWATCH_SATURATION_WAITING = 5
    settings.FLEETWATCH_SATURATION_KV = 0.8
    engine_host(register_instance, report, "i-1", make_engine(requests_waiting=10, requests_running=4,
                                                              kv_cache_usage_ratio=0.2, ttft_p95_s=2.0))
    engine_host(register_instance, report, "i-2", make_engine(requests_waiting=0, requests_running=1,
                                                              kv_cache_usage_ratio=0.4, model="big"))
    engine_host(register_instance, report, "i-3", make_failed_engine("unreachable"))
    register_instance("i-4")
    report("i-4", make_snapshot())
    summary = pool_engine(api)
    engine = summary["engine"]
    assert engine["instances_with_engine"] == 3
    assert (engine["requests_waiting_total"], engine["requests_running_total"]) == (10, 5)
    assert engine["kv_cache_usage_avg"] == pytest.approx(0.3) and engine["kv_cache_usage_max"] == 0.4
    assert engine["kv_cache_capacity_tokens_total"] == 8192 and engine["ttft_p95_max_s"] == 2.0
    # i-1: min(1, max(10 / 5, 0.2 / 0.8)) = 1; i-2: max(0, 0.4 / 0.8) = 0.5; the failed engine is not counted.
    assert engine["saturation"] == pytest.approx(0.75)
    assert engine["models"] == [{"model": "big", "instances": 1, "requests_waiting_total": 0},
                                {"model": "tiny", "instances": 1, "requests_waiting_total": 10}]
    assert summary["metric_source"]["engine"] == "agent_engine_scrape"
    assert summary["metric_quality"]["engine"] == "partial"  # 2 ok engines over 4 alive


def test_stale_instances_leave_the_pool_engine_figures(api, register_instance, report, frozen, settings):
    engine_host(register_instance, report, "i-1", make_engine(requests_waiting=7))
    frozen.shift(settings.FLEETWATCH_INSTANCE_TTL_S + 1)
    engine = pool_engine(api)["engine"]
    assert engine["instances_with_engine"] == 0 and engine["requests_waiting_total"] is None
    assert engine["models"] is None and engine["saturation"] is None


def test_the_series_keep_the_engine_figures(api, register_instance, report, frozen):
    engine_host(register_instance, report, "i-1", make_engine(requests_waiting=6, requests_running=3,
                                                              kv_cache_usage_ratio=0.6))
    record_instances()
    record_pool(T0)
    point = api.get("/v1/instance/history", instance_id="i-1", range="15m").json()["points"][-1]
    assert (point["requests_waiting"], point["requests_running"], point["kv_cache_usage_ratio"]) == (6, 3, 0.6)
    pool_point = api.get("/debug/pool_resource/history", range="15m").json()["points"][-1]
    assert (pool_point["requests_waiting_total"], pool_point["kv_cache_usage_max"]) == (6, 0.6)
    assert pool_point["saturation"] == pytest.approx(1.0)  # 6 waiting ÷ 5


def test_an_engine_objects_kv_events_are_accepted_and_kept(register_instance, report, listed_instances, frozen):
    """SPEC 15.2: the agent's ``kv_events`` key (an object, or null without an event endpoint) is kept as sent."""
    kv_events = {"status": "ok", "error": None, "resident_blocks": 3, "events_total": 7, "gaps_total": 0,
                 "last_event_age_ms": 120, "block_tokens": 16}
    engine_host(register_instance, report, "i-1", make_engine(engine_index="0", kv_events=kv_events),
                make_engine(engine_index="1", kv_events=None))
    resource = listed_instances()["i-1"]["resource"]
    assert resource["engine_count"] == 2 and resource["engine_status"] == "ok"
    assert [engine["kv_events"] for engine in resource["raw_resource"]["engines"]] == [kv_events, None]

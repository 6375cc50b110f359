"""The serving engines on the pages (SPEC 13): the pool table's queue and KV columns, their filter and sorts,
the instance page's engine cards, the pool's LOAD card and engine figures, the fleet's waiting and saturation."""

import re
from functools import partial

import pytest

from tests.factories import make_engine, make_failed_engine, make_pool_resource, make_snapshot
from tests.pages import conftest as pages
from tests.pages.conftest import by_testid, one, text_of

pytestmark = pytest.mark.django_db


row_ids = partial(pages.row_ids, attribute="data-instance-id")


def row_text(html, instance_id):
    return pages.row_of(html, instance_id, "data-instance-id").text


@pytest.fixture
def engine_pool(register_instance, report, frozen):
    """busy (12 waiting, KV 90 %), calm (0 waiting, KV 10 %), down (its engine unreachable), plain (no engine)."""

    def host(instance_id, engines):
        register_instance(instance_id)
        snapshot = make_snapshot() if engines is None else make_snapshot(engines=engines)
        assert report(instance_id, snapshot).status_code == 200

    host("busy", [make_engine(requests_waiting=12, requests_running=4, kv_cache_usage_ratio=0.9)])
    host("calm", [make_engine(requests_waiting=0, requests_running=1, kv_cache_usage_ratio=0.1)])
    host("down", [make_failed_engine("unreachable")])
    host("plain", None)


def test_the_pool_table_shows_each_instances_queue_and_kv_cache(page, engine_pool):
    html = page("/pool/")
    assert "12 / 4 90.0 %" in row_text(html, "busy")
    assert "0 / 1 10.0 %" in row_text(html, "calm")
    assert "unreachable" in row_text(html, "down")
    assert "no engine" in row_text(html, "plain")


@pytest.mark.parametrize(("query", "expected"), [
    ("sort=waiting", ["busy", "calm", "down", "plain"]),
    ("sort=kv", ["busy", "calm", "down", "plain"]),
    ("sort=waiting&desc=1", ["calm", "busy", "down", "plain"]),
    ("queued=1", ["busy"]),
])
def test_the_pool_table_sorts_by_queue_and_kv_and_filters_the_queued(page, engine_pool, query, expected):
    html = page(f"/pool/rows?{query}")
    assert row_ids(html) == expected


def test_the_cards_view_shows_the_queue(page, engine_pool):
    html = page("/pool/?view=cards")
    assert "queue 12 waiting · 4 running" in by_testid(html, "card-engine-queue")


def test_the_instance_page_has_a_card_per_engine(page, register_instance, report, frozen):
    register_instance("i-1")
    engines = [make_engine(engine_index="0", requests_waiting=8, requests_running=4, kv_cache_usage_ratio=0.5,
                           lora={"max": 2, "running": ["sql"], "waiting": []}),
               make_failed_engine("timeout", url="http://127.0.0.1:8002", error="timed out after 500 ms")]
    report("i-1", make_snapshot(engines=engines))
    html = page("/pool/instances/i-1/")
    cards = by_testid(html, "engine-card")
    assert len(cards) == 2
    ok, failed = cards
    assert ok.startswith("vllm 0 tiny ok http://127.0.0.1:8001 8 waiting · 4 running")
    assert "50.0 %" in ok and "4,096 tokens of KV cache" in ok
    assert "TTFT p50 / p95 200 ms / 900 ms" in ok and "ITL p50 50 ms" in ok and "sql" in ok
    assert by_testid(html, "engine-card-status") == ["ok", "timeout"]
    assert one(html, "engine-error") == "timed out after 500 ms"
    assert "– waiting · – running" in failed


def test_the_instance_page_has_no_engine_panel_for_a_host_without_engines(page, cpu_host):
    cpu_host("cpu-1")
    assert "Serving engines" not in page("/pool/instances/cpu-1/")


def test_the_load_card_shows_the_engines_queue_when_no_instance_reports_load(page, engine_pool):
    html = page("/pool/")
    assert one(html, "load-engine") == "12 waiting · 5 running"
    assert one(html, "pool-engine-waiting") == "12 waiting"


def test_the_load_card_keeps_the_data_plane_load_when_instances_report_it(page, engine_pool, instance_heartbeat):
    instance_heartbeat("busy", inflight=3, qps_1m=1.5)
    html = page("/pool/")
    assert by_testid(html, "load-engine") == []
    assert "3 in flight" in text_of(html)


def test_the_fleet_shows_each_pools_queue_and_saturation(page, register_proxy, frozen):
    register_proxy("pxy-busy", pool_resource=make_pool_resource(engine={"requests_waiting_total": 40, "saturation": 0.9}))
    register_proxy("pxy-calm", host="10.0.0.2",
                   pool_resource=make_pool_resource(engine={"requests_waiting_total": 2, "saturation": 0.25}))
    html = page("/fleet/")
    assert by_testid(html, "fleet-row-waiting") == ["40", "2"]
    assert one(html, "fleet-waiting") == "42 waiting"
    assert "most saturated pool pxy-busy 90.0 %" in text_of(html.split('id="fleet-summary"')[1].split("</section>")[0])
    assert re.findall(r'data-proxy-id="([^"]+)"', page("/fleet/rows?sort=saturation")) == ["pxy-busy", "pxy-calm"]

"""What each engine serves (SPEC 16.1): ``served`` from its ``/v1/models``, read at start and every interval."""

import time

import pytest

from agent.config import load_settings
from agent.engines.scraper import EngineScrapers
from agent.engines.served import MAX_SERVED, parse_served
from tests.agent.conftest import ENGINE_CAPTURES, FakeEngine

WAIT_S = 10
TINY = {"id": "tiny", "object": "model", "created": 1, "owned_by": "vllm", "root": "/models/tiny", "parent": None,
        "max_model_len": 2048, "permission": []}
SQL_LORA = {"id": "sql-lora", "object": "model", "root": "/adapters/sql", "parent": "tiny"}


@pytest.fixture
def vllm():
    engine = FakeEngine((ENGINE_CAPTURES / "vllm-0.32.0-cpu-busy.prom").read_text())
    engine.models = [TINY]
    yield engine
    engine.close()


def scrapers(url, clock, interval_ms=30_000):
    engines = EngineScrapers([url], timeout_ms=500, window_ms=10_000, clock_ms=clock.ms,
                             clock_wall_ms=lambda: 1_796_119_700_000 + clock.ms(), models_interval_ms=interval_ms)
    engines.start()
    return engines


def scrape(engines, models_read=None, engine=None):
    """One tick: a scrape, and the models read when one is due (it follows the scrape on the same thread)."""
    engines.request()
    for scraper in engines.scrapers:
        assert scraper.wait_idle(WAIT_S)
    if models_read is not None:
        until = time.monotonic() + WAIT_S
        while engine.models_requests < models_read and time.monotonic() < until:
            time.sleep(0.01)
        time.sleep(0.05)  # the read's answer is kept right after it arrives
    return engines.objects()


def test_it_lists_what_the_engine_serves_as_the_engine_names_it(vllm, clock):
    engines = scrapers(vllm.url, clock)
    try:
        [engine] = scrape(engines, models_read=1, engine=vllm)
        assert engine["served"] == [{"id": "tiny", "root": "/models/tiny", "parent": None}]
        assert engines.served() == [[{"id": "tiny", "root": "/models/tiny", "parent": None}]]
    finally:
        engines.stop()


def test_it_reads_the_models_again_only_after_the_interval(vllm, clock):
    engines = scrapers(vllm.url, clock)
    try:
        scrape(engines, models_read=1, engine=vllm)
        vllm.models = [TINY, SQL_LORA]
        clock.advance(29_000)
        [engine] = scrape(engines)
        assert vllm.models_requests == 1
        assert [item["id"] for item in engine["served"]] == ["tiny"]
        clock.advance(1_000)
        [engine] = scrape(engines, models_read=2, engine=vllm)
        assert engine["served"][1] == {"id": "sql-lora", "root": "/adapters/sql", "parent": "tiny"}
    finally:
        engines.stop()


def test_served_is_null_before_a_read_and_after_a_failed_one(vllm, clock):
    vllm.models = None  # a 404: an engine without /v1/models
    engines = scrapers(vllm.url, clock)
    try:
        [engine] = scrape(engines, models_read=1, engine=vllm)
        assert engine["status"] == "ok" and engine["served"] is None
        vllm.models = [TINY]
        clock.advance(30_000)
        [engine] = scrape(engines, models_read=2, engine=vllm)
        assert engine["served"] is not None
        vllm.models = None
        clock.advance(30_000)
        [engine] = scrape(engines, models_read=3, engine=vllm)
        assert engine["served"] is None  # unknown now, never the list of an earlier read
    finally:
        engines.stop()


def test_without_an_interval_the_models_are_never_read(vllm, clock):
    engines = scrapers(vllm.url, clock, interval_ms=None)
    try:
        [engine] = scrape(engines)
        assert engine["served"] is None and vllm.models_requests == 0
    finally:
        engines.stop()


@pytest.mark.parametrize("text", ["<html>", "[]", '{"data": {}}', '{"object": "list"}', "null"])
def test_an_answer_that_is_not_a_model_list_is_unknown(text):
    assert parse_served(text) is None


def test_it_keeps_at_most_64_entries_and_skips_those_without_an_id():
    text = '{"data": [{"root": "/x"}, 7, ' + ",".join(f'{{"id": "m{n}"}}' for n in range(100)) + "]}"
    served = parse_served(text)
    assert len(served) == MAX_SERVED == 64 and served[0] == {"id": "m0", "root": None, "parent": None}


def test_the_interval_is_a_setting_with_its_variable():
    assert load_settings([]).engine_models_interval_s == 30.0
    assert load_settings(["--engine-models-interval-s", "5"]).engine_models_interval_s == 5.0
    assert load_settings([], {"FLEETWATCH_AGENT_ENGINE_MODELS_INTERVAL_S": "12"}).engine_models_interval_s == 12.0

"""A snapshot's ``engines`` as the Proxy's columns, and the pool's engine section (SPEC 13): pure, no database."""

import numpy as np
import pytest

from proxy_app.ingest.engines import engine_columns, engine_pressure, model_counts, saturation
from tests.factories import T0_MS, make_engine, make_failed_engine

TS = T0_MS


engine, failed = make_engine, make_failed_engine  # scraped 300 ms before TS


def test_it_has_no_engine_columns_without_an_engines_list():
    columns = engine_columns({"devices": {}}, TS)
    assert set(columns.values()) == {None}


def test_it_counts_an_empty_list_as_no_engines_measured():
    columns = engine_columns({"engines": []}, TS)
    assert (columns["engine_count"], columns["engine_ok_count"], columns["engine_status"]) == (0, 0, None)
    assert columns["engine_models"] == [] and columns["requests_waiting"] is None


def test_it_reads_one_ok_engine():
    columns = engine_columns({"engines": [engine()]}, TS)
    assert columns == {
        "engine_count": 1, "engine_ok_count": 1, "engine_status": "ok", "engine_models": ["tiny"],
        "requests_running": 4, "requests_waiting": 8, "kv_cache_usage_ratio": 0.25,
        "kv_cache_capacity_tokens": 4096, "ttft_p95_s": 0.9, "engine_sample_age_ms": 300, "engine_loras": [],
        "kv_events_ok_count": 0, "adapter_parents": None,
    }


def test_served_base_models_join_the_models_and_served_adapters_the_adapters_with_their_parent():
    served = [{"id": "tiny", "root": "/models/tiny", "parent": None},
              {"id": "sql-lora", "root": "/adapters/sql", "parent": "tiny"}, {"root": "/no-id"}, "junk"]
    columns = engine_columns({"engines": [engine(model="tiny-metrics-name", served=served)]}, TS)
    assert columns["engine_models"] == ["tiny", "tiny-metrics-name"]
    assert columns["engine_loras"] == ["sql-lora"]
    assert columns["adapter_parents"] == {"sql-lora": "tiny"}


@pytest.mark.parametrize("served", [None, [], "tiny", 7])
def test_served_null_or_garbage_adds_nothing(served):
    columns = engine_columns({"engines": [engine(served=served)]}, TS)
    assert columns["engine_models"] == ["tiny"] and columns["engine_loras"] == []
    assert columns["adapter_parents"] is None


def test_it_sums_queues_and_takes_the_worst_kv_and_ttft_over_ok_engines_of_a_data_parallel_server():
    engines = [engine(engine_index="0", requests_waiting=3, kv_cache_usage_ratio=0.5, ttft_p95_s=0.4),
               engine(engine_index="1", requests_waiting=5, kv_cache_usage_ratio=0.75, ttft_p95_s=1.5,
                      scraped_at_ms=TS - 100)]
    columns = engine_columns({"engines": engines}, TS)
    assert (columns["requests_waiting"], columns["requests_running"]) == (8, 8)
    assert (columns["kv_cache_usage_ratio"], columns["ttft_p95_s"]) == (0.75, 1.5)
    assert columns["kv_cache_capacity_tokens"] == 8192
    assert columns["engine_sample_age_ms"] == 100


def test_it_leaves_failed_engines_out_of_the_figures_and_names_the_worst_status():
    engines = [engine(model="llama"), failed("timeout"), failed("unreachable", url="http://127.0.0.1:8002")]
    columns = engine_columns({"engines": engines}, TS)
    assert (columns["engine_count"], columns["engine_ok_count"], columns["engine_status"]) == (3, 1, "unreachable")
    assert columns["requests_waiting"] == 8 and columns["engine_models"] == ["llama"]


def test_it_gives_null_figures_when_no_engine_is_ok():
    columns = engine_columns({"engines": [failed("http_error")]}, TS)
    assert columns["engine_status"] == "http_error"
    assert [columns[name] for name in ("requests_running", "requests_waiting", "kv_cache_usage_ratio")] == [None] * 3


@pytest.mark.parametrize("value", [None, "n/a", "garbage", True, -1, float("nan"), [], {}])
def test_it_reads_what_is_not_a_count_as_unknown_never_zero(value):
    assert engine_columns({"engines": [engine(requests_waiting=value)]}, TS)["requests_waiting"] is None


@pytest.mark.parametrize("value", [1.5, -0.1, "x"])
def test_it_reads_a_kv_usage_outside_zero_to_one_as_unknown(value):
    assert engine_columns({"engines": [engine(kv_cache_usage_ratio=value)]}, TS)["kv_cache_usage_ratio"] is None


@pytest.mark.parametrize("listed", ["vllm", {"status": "ok"}, 7])
def test_it_reads_an_engines_value_that_is_not_a_list_as_absent(listed):
    assert engine_columns({"engines": listed}, TS)["engine_count"] is None


def test_it_skips_items_that_are_not_objects_and_reads_unknown_statuses_as_bad_format():
    columns = engine_columns({"engines": [engine(), "x", None, engine(status="sleepy")]}, TS)
    assert (columns["engine_count"], columns["engine_ok_count"], columns["engine_status"]) == (2, 1, "bad_format")


def test_it_saturates_at_one_from_the_larger_of_queue_and_kv():
    assert saturation(2, 0.4, 5, 0.8) == 0.5
    assert saturation(20, 0.1, 5, 0.8) == 1.0
    assert saturation(np.nan, 0.6, 5, 0.8) == pytest.approx(0.75)
    assert engine_pressure(20, 0.1, 5, 0.8) == 4.0


def test_it_is_the_same_formula_over_columns_as_over_one_engine():
    waiting, kv = np.array([2.0, 20.0, np.nan, 0.0]), np.array([0.4, 0.1, 0.6, np.nan])
    assert saturation(waiting, kv, 5, 0.8).tolist() == [saturation(w, k, 5, 0.8) for w, k in zip(waiting, kv)]


def test_it_counts_models_most_instances_first_an_instance_under_each_of_its_models():
    groups = [(["llama"], 3, 7), (["llama", "mistral"], 1, 2), (["qwen"], 4, None)]
    assert model_counts(groups) == [("llama", 4, 9), ("qwen", 4, None), ("mistral", 1, 2)]
    assert len(model_counts([([f"m{n:02}"], 1, 0) for n in range(40)])) == 32


def test_it_lists_the_running_loras_of_the_ok_engines_only():
    up = engine(lora={"max": 4, "running": ["sql-lora", "chat", "sql-lora"], "waiting": ["later"]})
    down = engine(status="unreachable", lora={"running": ["ghost"]})
    odd = engine(lora={"running": "not-a-list"})
    assert engine_columns({"engines": [up, down, odd]}, TS)["engine_loras"] == ["chat", "sql-lora"]


def test_it_counts_the_ok_engines_whose_kv_events_are_read():
    events = {"status": "ok", "error": None, "resident_blocks": 3, "events_total": 9, "gaps_total": 0,
              "last_event_age_ms": 20, "block_tokens": 16}
    listed = [engine(kv_events=events), engine(kv_events={**events, "status": "gap"}), engine(kv_events=None),
              engine(kv_events="garbage"), engine(status="timeout", kv_events=events)]
    assert engine_columns({"engines": listed}, TS)["kv_events_ok_count"] == 1

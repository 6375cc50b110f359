"""SPEC 13's engine figures over a window: deltas, quantiles, restarts, failures, with injected times."""

from pathlib import Path

import pytest

from agent.engines.figures import EngineTracker, histogram_quantile

ENGINES = Path(__file__).parent / "data" / "engines"
BUSY = (ENGINES / "vllm-0.32.0-cpu-busy.prom").read_text()
IDLE = (ENGINES / "vllm-0.32.0-cpu-idle.prom").read_text()
SGLANG_A = (ENGINES / "sglang-dp2-a.prom").read_text()
SGLANG_B = (ENGINES / "sglang-dp2-b.prom").read_text()
URL = "http://127.0.0.1:8000"
WALL_MS = 1_796_119_700_000
INF = float("inf")
ENGINE_FIELDS = ["url", "kind", "model", "engine_index", "status", "error", "scraped_at_ms", "scrape_ms",
                 "requests_running", "requests_waiting", "kv_cache_usage_ratio", "kv_cache_capacity_tokens",
                 "prefix_cache_hit_ratio", "preemptions", "prompt_tokens_per_s", "generation_tokens_per_s",
                 "ttft_p50_s", "ttft_p95_s", "itl_p50_s", "window_ms", "lora", "sleeping"]
WINDOWED = ["prefix_cache_hit_ratio", "preemptions", "prompt_tokens_per_s", "generation_tokens_per_s",
            "ttft_p50_s", "ttft_p95_s", "itl_p50_s"]


def observe(tracker, text, at_ms):
    return tracker.observe(text, at_ms, WALL_MS + at_ms, 3.25)


@pytest.mark.parametrize(("q", "buckets", "expected"), [
    (0.5, ((1.0, 0), (2.0, 10), (INF, 10)), 1.5),              # inside the bucket, linearly
    (0.5, ((1.0, 4), (2.0, 4), (INF, 4)), 0.5),                # the lowest bucket starts at 0
    (0.99, ((1.0, 1), (2.0, 1), (INF, 100)), 2.0),             # in +Inf: the highest finite bound
    (0.5, ((1.0, 0), (INF, 0)), None),                         # nothing observed
    (0.95, ((2.5, 0), (5.0, 4), (7.5, 8), (INF, 8)), 7.25),   # the captures' TTFT deltas (below)
])
def test_it_takes_quantiles_as_prometheus_histogram_quantile(q, buckets, expected):
    assert histogram_quantile(q, buckets) == expected


def test_it_gives_gauges_at_once_and_the_windowed_figures_null_on_the_first_scrape():
    [engine] = observe(EngineTracker(URL), BUSY, 0)
    assert list(engine) == ENGINE_FIELDS
    assert engine == {
        "url": URL, "kind": "vllm", "model": "tiny", "engine_index": "0", "status": "ok", "error": None,
        "scraped_at_ms": WALL_MS, "scrape_ms": 3.25, "requests_running": 4, "requests_waiting": 8,
        "kv_cache_usage_ratio": 0.0107, "kv_cache_capacity_tokens": 524288, **dict.fromkeys(WINDOWED),
        "window_ms": 10_000, "lora": None, "sleeping": False,
    }


def test_it_derives_rates_ratios_and_quantiles_between_two_real_scrapes():
    tracker = EngineTracker(URL)
    observe(tracker, BUSY, 0)
    [engine] = observe(tracker, IDLE, 10_000)
    assert (engine["requests_running"], engine["requests_waiting"], engine["kv_cache_usage_ratio"]) == (0, 0, 0.0)
    # Between the captures: 64 prompt tokens, 12,435 generated, 64 prefix queries and no hit, no
    # preemption; 8 first tokens, 4 in (2.5, 5] s and 4 in (5, 7.5] s; 12,427 inter-token gaps,
    # 12,295 of them under 10 ms.
    assert engine["prompt_tokens_per_s"] == 6.4
    assert engine["generation_tokens_per_s"] == 1243.5
    assert (engine["prefix_cache_hit_ratio"], engine["preemptions"]) == (0.0, 0)
    assert (engine["ttft_p50_s"], engine["ttft_p95_s"]) == (5.0, 7.25)
    assert engine["itl_p50_s"] == round(0.01 * 6213.5 / 12295, 6)


def test_it_differences_against_the_oldest_scrape_inside_the_window():
    tracker = EngineTracker(URL, window_ms=10_000)
    observe(tracker, BUSY, 0)
    observe(tracker, BUSY, 5_000)
    assert observe(tracker, IDLE, 10_000)[0]["prompt_tokens_per_s"] == 6.4  # (96 - 32) over 10 s
    # 11 s on, the first scrape has left the window: the base is the one at 5 s.
    assert observe(tracker, IDLE, 11_000)[0]["prompt_tokens_per_s"] == round(64 / 6, 2)
    # Idle for a while: measured zeros, and no latency because nothing finished.
    [engine] = observe(tracker, IDLE, 21_000)
    assert (engine["prompt_tokens_per_s"], engine["preemptions"]) == (0.0, 0)
    assert engine["prefix_cache_hit_ratio"] is None  # no queries in the window
    assert (engine["ttft_p50_s"], engine["ttft_p95_s"], engine["itl_p50_s"]) == (None, None, None)


def test_it_starts_the_window_afresh_when_a_counter_goes_down():
    tracker = EngineTracker(URL)
    observe(tracker, IDLE, 0)
    [engine] = observe(tracker, BUSY, 1_000)  # the engine restarted: counters are lower again
    assert [engine[name] for name in WINDOWED] == [None] * len(WINDOWED)
    assert engine["requests_waiting"] == 8
    assert observe(tracker, IDLE, 2_000)[0]["prompt_tokens_per_s"] == 64.0


def test_it_keeps_the_engines_on_a_failed_scrape_with_every_figure_null():
    tracker = EngineTracker(URL)
    observe(tracker, BUSY, 0)
    [engine] = tracker.failed("timeout", "no answer within 500 ms", WALL_MS + 1_000, None)
    assert (engine["kind"], engine["model"], engine["engine_index"]) == ("vllm", "tiny", "0")
    assert (engine["status"], engine["error"], engine["scraped_at_ms"]) == ("timeout", "no answer within 500 ms",
                                                                            WALL_MS + 1_000)
    figures = {name: value for name, value in engine.items()
               if name not in ("url", "kind", "model", "engine_index", "status", "error", "scraped_at_ms",
                               "window_ms")}
    assert figures == dict.fromkeys(figures)  # never the previous values
    # The window survives a short outage.
    assert observe(tracker, IDLE, 10_000)[0]["prompt_tokens_per_s"] == 6.4


def test_it_reports_an_engine_never_seen_as_one_anonymous_object():
    [engine] = EngineTracker(URL).failed("unreachable", "ConnectionRefusedError: refused", WALL_MS, 0.4)
    assert (engine["url"], engine["kind"], engine["model"], engine["engine_index"]) == (URL, None, None, None)
    assert (engine["status"], engine["scrape_ms"], engine["requests_waiting"]) == ("unreachable", 0.4, None)


@pytest.mark.parametrize(("body", "error"), [
    ("<html>hello</html>", "no vllm: or sglang: metrics in the answer"),
    ("# HELP process_cpu_seconds_total x\nprocess_cpu_seconds_total 7.7\n", "no vllm: or sglang: metrics"),
    ('vllm:num_requests_running{engine="0" 4\n', "malformed sample line"),
])
def test_it_calls_an_answer_it_cannot_read_bad_format_with_no_kind(body, error):
    tracker = EngineTracker(URL)
    observe(tracker, BUSY, 0)
    [engine] = observe(tracker, body, 1_000)
    assert (engine["status"], engine["kind"], engine["requests_waiting"]) == ("bad_format", None, None)
    assert error in engine["error"]
    assert engine["model"] == "tiny"  # the engine it was


def test_it_reads_sglang_over_the_window_with_its_hit_rate_gauge():
    tracker = EngineTracker(URL)
    observe(tracker, SGLANG_A, 0)
    first, second = observe(tracker, SGLANG_B, 10_000)
    assert (first["kind"], first["engine_index"], second["engine_index"]) == ("sglang", "0", "1")
    assert (first["requests_running"], first["requests_waiting"], first["kv_cache_usage_ratio"]) == (14, 7, 0.97)
    assert first["kv_cache_capacity_tokens"] == 413862
    assert (first["prefix_cache_hit_ratio"], second["prefix_cache_hit_ratio"]) == (0.44, 0.4)
    assert (first["preemptions"], second["preemptions"]) == (1, 0)  # retracted requests in the window
    assert first["prompt_tokens_per_s"] == second["prompt_tokens_per_s"] == 600.0
    assert first["generation_tokens_per_s"] == 1200.0
    # 16 first tokens at 0.3 s and 4 at 1.5 s; 1,800 gaps of 9 ms and 200 of 50 ms.
    assert (first["ttft_p50_s"], first["ttft_p95_s"]) == (0.325, 1.75)
    assert first["itl_p50_s"] == round(0.008 + 0.002 * 1000 / 1800, 6)
    assert first["lora"] is None and first["sleeping"] is None


def test_it_forgets_the_window_of_an_engine_that_went_away():
    tracker = EngineTracker(URL)
    observe(tracker, SGLANG_A, 0)
    only_rank_1 = "\n".join(line for line in SGLANG_B.splitlines() if 'dp_rank="0"' not in line)
    [engine] = observe(tracker, only_rank_1, 10_000)
    assert engine["engine_index"] == "1" and engine["preemptions"] == 0
    [engine, back] = observe(tracker, SGLANG_B, 11_000)
    assert engine["preemptions"] is None  # rank 0 is new again: no base to difference against

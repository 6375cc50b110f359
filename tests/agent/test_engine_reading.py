"""Which engines a scrape describes and what it says of each (SPEC 13's sources), on real captures."""

from pathlib import Path

from agent.engines.exposition import parse_samples
from agent.engines.reading import SGLANG, VLLM, read_engines

ENGINES = Path(__file__).parent / "data" / "engines"
BUSY = (ENGINES / "vllm-0.32.0-cpu-busy.prom").read_text()
SGLANG_A = (ENGINES / "sglang-dp2-a.prom").read_text()
# vLLM 0.29's LoRA gauge as a CPU server with two adapters exported it.
LORA_LINE = ('vllm:lora_requests_info{max_lora="2",running_lora_adapters="alpaca",'
             'waiting_lora_adapters="alpaca"} 1.789828498802105e+09\n')


def read(text, sources=VLLM):
    return read_engines(sources, parse_samples(text, sources.wanted))


def test_it_reads_the_gauges_of_a_busy_vllm():
    [engine] = read(BUSY)
    assert (engine.model, engine.engine_index) == ("tiny", "0")
    assert (engine.requests_running, engine.requests_waiting) == (4, 8)
    assert engine.kv_cache_usage_ratio == 0.0107
    assert engine.kv_cache_capacity_tokens == 4096 * 128  # num_gpu_blocks x block_size of cache_config_info
    assert engine.sleeping is False and engine.lora is None  # awake; served without LoRA
    assert engine.counters == {"prefix_hits": 0.0, "prefix_queries": 32.0, "preemptions": 0.0,
                               "prompt_tokens": 32.0, "generation_tokens": 5565.0}
    ttft = engine.histograms["ttft"]
    assert ttft[0] == (0.001, 0.0) and ttft[-1] == (float("inf"), 4.0) and len(ttft) == 23


def test_it_falls_back_to_the_older_vllm_names():
    older = (BUSY.replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
             .replace("vllm:prefix_cache_", "vllm:gpu_prefix_cache_")
             .replace("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"))
    [engine] = read(older)
    [current] = read(BUSY)
    assert engine.kv_cache_usage_ratio == current.kv_cache_usage_ratio == 0.0107
    assert engine.counters == current.counters
    assert engine.histograms["itl"] == current.histograms["itl"]


def test_it_gives_null_never_zero_for_a_family_not_exported():
    gauges_only = "\n".join(line for line in BUSY.splitlines() if line.startswith(
        ("vllm:num_requests_running", "vllm:num_requests_waiting")))
    [engine] = read(gauges_only)
    assert (engine.requests_running, engine.requests_waiting) == (4, 8)
    assert engine.kv_cache_usage_ratio is None and engine.kv_cache_capacity_tokens is None
    assert engine.sleeping is None and engine.counters == {} and engine.histograms == {}


def test_it_makes_one_engine_per_data_parallel_engine_label():
    second = "\n".join(line.replace('engine="0"', 'engine="1"').replace(" 4.0", " 2.0")
                       for line in BUSY.splitlines() if line.startswith("vllm:"))
    first, other = read(BUSY + second)
    assert (first.engine_index, other.engine_index) == ("0", "1")
    assert (first.requests_running, other.requests_running) == (4, 2)
    assert other.kv_cache_capacity_tokens == 524288


def test_it_makes_one_engine_per_model_and_reads_the_lora_gauge():
    other_model = "\n".join(line.replace('model_name="tiny"', 'model_name="other"')
                            for line in BUSY.splitlines() if line.startswith("vllm:num_requests"))
    models = read(BUSY + other_model + "\n" + LORA_LINE)
    assert [engine.model for engine in models] == ["other", "tiny"]
    # cache_config_info and the LoRA gauge carry no model_name: they describe every engine of the server.
    assert {engine.kv_cache_capacity_tokens for engine in models} == {524288}
    assert models[1].lora == {"max": 2, "running": ["alpaca"], "waiting": ["alpaca"]}


def test_it_reads_the_newest_lora_series_and_an_empty_adapter_list():
    older = LORA_LINE.replace("1.789828498802105e+09", "1.7e+09").replace('running_lora_adapters="alpaca"',
                                                                          'running_lora_adapters="gone"')
    newest = ('vllm:lora_requests_info{max_lora="4",running_lora_adapters="a, b",'
              'waiting_lora_adapters=""} 1.8e+09\n')
    [engine] = read(BUSY + older + newest)
    assert engine.lora == {"max": 4, "running": ["a", "b"], "waiting": []}


def test_it_says_sleeping_when_the_engine_is_not_awake():
    asleep = (BUSY.replace('sleep_state="awake"} 1.0', 'sleep_state="awake"} 0.0')
              .replace('sleep_state="weights_offloaded"} 0.0', 'sleep_state="weights_offloaded"} 1.0'))
    [engine] = read(asleep)
    assert engine.sleeping is True


def test_it_reads_sglang_per_data_parallel_rank_with_the_servers_token_figures():
    first, second = read(SGLANG_A, SGLANG)
    assert (first.model, first.engine_index, second.engine_index) == (
        "meta-llama/Llama-3.1-8B-Instruct", "0", "1")
    # Both tensor-parallel schedulers of a rank export: one engine per rank, not per scheduler.
    assert (first.requests_running, first.requests_waiting, second.requests_running) == (12, 3, 9)
    assert (first.kv_cache_usage_ratio, first.kv_cache_capacity_tokens) == (0.61, 413862)
    assert (first.hit_rate, second.hit_rate) == (0.42, 0.38)
    assert (first.counters["preemptions"], second.counters["preemptions"]) == (5.0, 2.0)
    # The tokenizer's counters and histograms are the server's, on every rank.
    assert first.counters["prompt_tokens"] == second.counters["prompt_tokens"] == 120_000.0
    assert first.histograms["ttft"] == second.histograms["ttft"]
    assert first.lora is None and first.sleeping is None  # SGLang exports neither


def test_it_reads_one_anonymous_engine_from_an_exposition_with_no_labels():
    [engine] = read("vllm:num_requests_running 3\nvllm:num_requests_waiting 0\n")
    assert (engine.model, engine.engine_index, engine.requests_running) == (None, None, 3)

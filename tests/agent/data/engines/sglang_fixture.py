"""Writes the SGLang ``/metrics`` fixtures (SGLang cannot run on these CPU-only machines).

The expositions are produced the way SGLang produces them, by
``prometheus_client`` itself, from SGLang's own metric names, help texts,
label names and default histogram buckets as its released source declares
them in ``python/sglang/srt/metrics/collector.py`` (``SchedulerMetricsCollector``
and ``TokenizerMetricsCollector``) and ``python/sglang/srt/managers/scheduler.py``
(the scheduler's labels: ``model_name``, ``engine_type``, ``tp_rank``,
``pp_rank``, ``moe_ep_rank``, plus ``dp_rank`` with data parallelism; the
tokenizer's: ``model_name``, ``engine_type``).

The server described: one model served with ``--dp 2 --tp 2
--enable-metrics-for-all-schedulers``, so both tensor-parallel schedulers of
each data-parallel rank export (the same) scheduler gauges, and the tokenizer
exports the token counters and latency histograms once for the server.
``a`` is a scrape; ``b`` the same server ten seconds later.

    python tests/agent/data/engines/sglang_fixture.py   # rewrites sglang-dp2-a.prom and -b.prom
"""

from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SCHEDULER_LABELS = ["model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank", "dp_rank"]
TOKENIZER_LABELS = ["model_name", "engine_type"]
# TokenizerMetricsCollector's defaults.
TTFT_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
ITL_BUCKETS = [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080,
               0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000]

# Per data-parallel rank: running, queued, token_usage, cache_hit_rate, retracted so far.
SCHEDULERS = {
    "a": {"0": (12, 3, 0.61, 0.42, 5), "1": (9, 0, 0.47, 0.38, 2)},
    "b": {"0": (14, 7, 0.97, 0.44, 6), "1": (10, 1, 0.52, 0.40, 2)},
}
MAX_TOTAL_NUM_TOKENS = 413_862
# Server-wide: prompt tokens, generation tokens, TTFT observations, ITL observations.
TOKENIZER = {
    "a": (120_000, 480_000, [0.15] * 40 + [0.5] * 10, [0.012] * 900 + [0.03] * 100),
    "b": (126_000, 492_000, [0.15] * 40 + [0.5] * 10 + [0.3] * 16 + [1.5] * 4,
          [0.012] * 900 + [0.03] * 100 + [0.009] * 1800 + [0.05] * 200),
}


def exposition(moment):
    registry = CollectorRegistry()

    def gauge(name, documentation):
        return Gauge(name, documentation, SCHEDULER_LABELS, registry=registry)

    running = gauge("sglang:num_running_reqs", "The number of running requests.")
    used = gauge("sglang:num_used_tokens", "The number of used tokens.")
    usage = gauge("sglang:token_usage", "The token usage.")
    queued = gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.")
    hit_rate = gauge("sglang:cache_hit_rate", "The prefix cache hit rate.")
    max_tokens = gauge("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.")
    retracted = Counter("sglang:num_retracted_requests_total", "Total number of retracted requests.",
                        SCHEDULER_LABELS, registry=registry)
    for dp_rank, (run, queue, ratio, hits, retractions) in SCHEDULERS[moment].items():
        for tp_rank in ("0", "1"):
            labels = {"model_name": MODEL, "engine_type": "unified", "tp_rank": tp_rank, "pp_rank": "0",
                      "moe_ep_rank": "0", "dp_rank": dp_rank}
            running.labels(**labels).set(run)
            used.labels(**labels).set(int(ratio * MAX_TOTAL_NUM_TOKENS))
            usage.labels(**labels).set(ratio)
            queued.labels(**labels).set(queue)
            hit_rate.labels(**labels).set(hits)
            max_tokens.labels(**labels).set(MAX_TOTAL_NUM_TOKENS)
            retracted.labels(**labels).inc(retractions)

    prompt, generation, ttfts, itls = TOKENIZER[moment]
    labels = {"model_name": MODEL, "engine_type": "unified"}
    Counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.", TOKENIZER_LABELS,
            registry=registry).labels(**labels).inc(prompt)
    Counter("sglang:generation_tokens_total", "Number of generation tokens processed.", TOKENIZER_LABELS,
            registry=registry).labels(**labels).inc(generation)
    ttft = Histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                     TOKENIZER_LABELS, buckets=TTFT_BUCKETS, registry=registry).labels(**labels)
    for value in ttfts:
        ttft.observe(value)
    itl = Histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                    TOKENIZER_LABELS, buckets=ITL_BUCKETS, registry=registry).labels(**labels)
    for value in itls:
        itl.observe(value)
    return generate_latest(registry).decode()


def main():
    here = Path(__file__).resolve().parent
    for moment in ("a", "b"):
        (here / f"sglang-dp2-{moment}.prom").write_text(exposition(moment))


if __name__ == "__main__":
    main()

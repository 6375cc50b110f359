"""Which engines a scrape describes and what it says of each (SPEC 13's sources).

``EngineSources`` names, per engine kind, the families each figure comes from
(newer names first, SPEC 13's older names as fallbacks). ``read_engines``
turns one parsed scrape into one ``EngineReading`` per engine:

- one engine per distinct ``model_name`` and engine label among the queue
  and KV gauges (vLLM labels each data-parallel engine ``engine``; SGLang its
  data-parallel rank ``dp_rank``);
- a series that lacks one of those labels (vLLM's ``cache_config_info`` has
  no ``model_name``; SGLang's token counters and latency histograms, written
  by its tokenizer process, have no rank) belongs to every engine it does not
  contradict;
- where several series fit one engine (SGLang's tensor-parallel ranks, when
  every scheduler exports), the one with the lowest ranks is read: they
  describe the same engine;
- a family the engine does not export gives None, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from agent.engines.exposition import finite


@dataclass(frozen=True)
class EngineSources:
    """Where one engine kind keeps each figure; tuples list the newer name first."""

    kind: str
    prefix: str
    engine_label: str
    running: tuple = ()
    waiting: tuple = ()
    kv_usage: tuple = ()
    capacity_tokens: tuple = ()
    cache_config: tuple = ()
    hit_rate: tuple = ()
    prefix_hits: tuple = ()
    prefix_queries: tuple = ()
    preemptions: tuple = ()
    prompt_tokens: tuple = ()
    generation_tokens: tuple = ()
    ttft: tuple = ()
    itl: tuple = ()
    lora: tuple = ()
    sleep: tuple = ()

    # Worked out once per kind, not at each of four scrapes a second (issue 32's agent cost): read, never change.
    @cached_property
    def counters(self):
        return {"prefix_hits": self.prefix_hits, "prefix_queries": self.prefix_queries,
                "preemptions": self.preemptions, "prompt_tokens": self.prompt_tokens,
                "generation_tokens": self.generation_tokens}

    @cached_property
    def histograms(self):
        return {"ttft": self.ttft, "itl": self.itl}

    @cached_property
    def histogram_buckets(self):
        """Each histogram's bucket sample names, newer first."""
        return {name: tuple(f"{family}_bucket" for family in families) for name, families in self.histograms.items()}

    @cached_property
    def wanted(self) -> frozenset:
        """Every sample name the figures are read from (histograms by their buckets)."""
        names = [*self.running, *self.waiting, *self.kv_usage, *self.capacity_tokens, *self.cache_config,
                 *self.hit_rate, *self.lora, *self.sleep]
        for group in self.counters.values():
            names.extend(group)
        for group in self.histogram_buckets.values():
            names.extend(group)
        return frozenset(names)


# vLLM V1 (0.32 names; the older ones of SPEC 13 as fallbacks).
VLLM = EngineSources(
    kind="vllm", prefix="vllm:", engine_label="engine",
    running=("vllm:num_requests_running",), waiting=("vllm:num_requests_waiting",),
    kv_usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    cache_config=("vllm:cache_config_info",),
    prefix_hits=("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    prefix_queries=("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    preemptions=("vllm:num_preemptions_total",),
    prompt_tokens=("vllm:prompt_tokens_total",), generation_tokens=("vllm:generation_tokens_total",),
    ttft=("vllm:time_to_first_token_seconds",),
    itl=("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    lora=("vllm:lora_requests_info",), sleep=("vllm:engine_sleep_state",),
)
# SGLang, names and labels of sglang/srt/metrics/collector.py (SchedulerMetricsCollector,
# TokenizerMetricsCollector). Its prefix cache has only a hit-rate gauge.
SGLANG = EngineSources(
    kind="sglang", prefix="sglang:", engine_label="dp_rank",
    running=("sglang:num_running_reqs",), waiting=("sglang:num_queue_reqs",),
    kv_usage=("sglang:token_usage",), capacity_tokens=("sglang:max_total_num_tokens",),
    hit_rate=("sglang:cache_hit_rate",),
    preemptions=("sglang:num_retracted_requests_total",),
    prompt_tokens=("sglang:prompt_tokens_total",), generation_tokens=("sglang:generation_tokens_total",),
    ttft=("sglang:time_to_first_token_seconds",), itl=("sglang:inter_token_latency_seconds",),
)
KINDS = (VLLM, SGLANG)
MODEL_LABEL = "model_name"


def _number_order(text):
    """Sort key that puts "2" before "10" and None first."""
    if text is None:
        return (0, 0, "")
    return (1, int(text), "") if text.isdigit() else (2, 0, text)


def _rank_order(labels):
    return tuple((name, _number_order(value)) for name, value in sorted(labels.items()) if name.endswith("_rank"))


def _first_present(samples, names):
    for name in names:
        if name in samples:
            return samples[name]
    return None


@dataclass
class EngineReading:
    """What one scrape says about one engine: current gauges, cumulative counters and buckets."""

    model: str | None
    engine_index: str | None
    requests_running: int | None = None
    requests_waiting: int | None = None
    kv_cache_usage_ratio: float | None = None
    kv_cache_capacity_tokens: int | None = None
    hit_rate: float | None = None
    lora: dict | None = None
    sleeping: bool | None = None
    counters: dict = field(default_factory=dict)  # name -> cumulative value (absent: not exported)
    histograms: dict = field(default_factory=dict)  # name -> ((le, cumulative count), ...) ascending

    def fits(self, labels, engine_label):
        """Whether a series belongs to this engine: none of its identity labels contradicts it."""
        return (labels.get(MODEL_LABEL, self.model) == self.model
                and labels.get(engine_label, self.engine_index) == self.engine_index)


def _pick(reading, samples, engine_label):
    """The value of the lowest-ranked series that fits the engine, or None."""
    fitting = [(labels, value) for labels, value in samples or () if reading.fits(labels, engine_label)]
    if len(fitting) < 2:  # one series (the usual case) needs no ranking
        return fitting[0][1] if fitting else None
    return min(fitting, key=lambda sample: _rank_order(sample[0]))[1]


def _count(value):
    value = finite(value)
    return None if value is None else int(round(value))


def _int_label(labels, name):
    text = labels.get(name, "")
    return int(text) if text.isdigit() else None


def _cache_capacity(reading, samples, engine_label):
    fitting = [labels for labels, _ in samples or () if reading.fits(labels, engine_label)]
    if not fitting:
        return None
    labels = fitting[0] if len(fitting) == 1 else min(fitting, key=_rank_order)
    blocks, block_size = _int_label(labels, "num_gpu_blocks"), _int_label(labels, "block_size")
    return None if blocks is None or block_size is None else blocks * block_size


def _lora(reading, samples, engine_label):
    # The gauge's value is the time of its last update: the newest series is the current one.
    fitting = [(labels, value) for labels, value in samples or () if reading.fits(labels, engine_label)]
    if not fitting:
        return None
    labels = max(fitting, key=lambda sample: sample[1])[0]

    def names(label):
        return [name.strip() for name in labels.get(label, "").split(",") if name.strip()]

    return {"max": _int_label(labels, "max_lora"), "running": names("running_lora_adapters"),
            "waiting": names("waiting_lora_adapters")}


def _sleeping(reading, samples, engine_label):
    states = {labels.get("sleep_state"): value for labels, value in samples or () if reading.fits(labels, engine_label)}
    if not states:
        return None
    if "awake" in states:
        return states["awake"] == 0
    return any(value == 1 for value in states.values())


def _histogram(reading, samples, engine_label):
    """Buckets of the lowest-ranked fitting series as ascending ``(le, cumulative)``; None when absent."""
    series = {}
    for labels, value in samples or ():
        bucket = labels.bucket()
        if bucket is not None and reading.fits(labels, engine_label):
            buckets = series.get(bucket[0])
            if buckets is None:
                buckets = series[bucket[0]] = []
            buckets.append((bucket[1], value))
    if not series:
        return None
    key = next(iter(series)) if len(series) == 1 else min(series, key=lambda k: _rank_order(dict(k)))
    return tuple(sorted(series[key]))


def engine_keys(sources: EngineSources, samples):
    """``(model, engine_index)`` of every engine, from the queue and KV gauges (else any series)."""
    anchors = [_first_present(samples, names) for names in (sources.running, sources.waiting, sources.kv_usage)]
    keys = {(labels.get(MODEL_LABEL), labels.get(sources.engine_label))
            for group in anchors if group for labels, _ in group}
    if not keys:
        keys = {(labels.get(MODEL_LABEL), labels.get(sources.engine_label))
                for group in samples.values() for labels, _ in group
                if MODEL_LABEL in labels or sources.engine_label in labels}
    return sorted(keys or {(None, None)}, key=lambda k: (k[0] or "", _number_order(k[1])))


def read_engines(sources: EngineSources, samples) -> list:
    """One ``EngineReading`` per engine in a parsed scrape."""
    label = sources.engine_label
    readings = []
    for model, engine_index in engine_keys(sources, samples):
        reading = EngineReading(model, engine_index)
        reading.requests_running = _count(_pick(reading, _first_present(samples, sources.running), label))
        reading.requests_waiting = _count(_pick(reading, _first_present(samples, sources.waiting), label))
        usage = finite(_pick(reading, _first_present(samples, sources.kv_usage), label))
        reading.kv_cache_usage_ratio = None if usage is None else round(min(1.0, max(0.0, usage)), 4)
        if sources.capacity_tokens:
            reading.kv_cache_capacity_tokens = _count(
                _pick(reading, _first_present(samples, sources.capacity_tokens), label))
        else:
            reading.kv_cache_capacity_tokens = _cache_capacity(
                reading, _first_present(samples, sources.cache_config), label)
        rate = finite(_pick(reading, _first_present(samples, sources.hit_rate), label))
        reading.hit_rate = None if rate is None else round(min(1.0, max(0.0, rate)), 4)
        reading.lora = _lora(reading, _first_present(samples, sources.lora), label)
        reading.sleeping = _sleeping(reading, _first_present(samples, sources.sleep), label)
        for name, names in sources.counters.items():
            value = finite(_pick(reading, _first_present(samples, names), label))
            if value is not None:
                reading.counters[name] = value
        for name, names in sources.histogram_buckets.items():
            buckets = _histogram(reading, _first_present(samples, names), label)
            if buckets is not None:
                reading.histograms[name] = buckets
        readings.append(reading)
    return readings

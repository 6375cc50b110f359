"""SPEC 13's engine figures across scrapes: windows, deltas, quantiles, the objects.

Pure state and functions, no I/O: ``engines.py`` fetches and hands the text
over. Gauges are reported as read. Counters and histograms become figures
over a window (``window_ms``): the difference between this scrape and the
oldest one kept in the window, so the first scrape has none (null), and a
counter that went down (the engine restarted) starts the window afresh.
Quantiles come from the histogram's bucket deltas, interpolated inside the
bucket as Prometheus' ``histogram_quantile`` does; null when nothing finished
in the window.
"""

from __future__ import annotations

import math
from collections import deque

from agent.engines.exposition import ExpositionError, metric_prefix, parse_samples
from agent.engines.reading import KINDS, EngineReading, read_engines

OK = "ok"
UNREACHABLE = "unreachable"
TIMEOUT = "timeout"
HTTP_ERROR = "http_error"
BAD_FORMAT = "bad_format"


def histogram_quantile(q, buckets):
    """The ``q`` quantile of cumulative ``(le, count)`` buckets, as Prometheus' ``histogram_quantile``.

    Linear inside the bucket that holds the rank; the lowest bucket starts at
    0; a rank in the ``+Inf`` bucket gives the highest finite bound. None
    when the buckets hold no observation.
    """
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for index, (bound, count) in enumerate(buckets):
        if count >= rank:
            if math.isinf(bound):
                return buckets[index - 1][0] if index > 0 else None
            if index == 0 and bound <= 0:
                return bound
            in_bucket = count - lower_count
            if in_bucket <= 0:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / in_bucket
        lower_bound, lower_count = bound, count
    return None


def bucket_deltas(now, base):
    """Per-bucket difference of two cumulative histograms with the same bounds; None if they differ."""
    if base is None or len(now) != len(base):
        return None
    deltas = [(le, count - before) for (le, count), (base_le, before) in zip(now, base) if le == base_le]
    return tuple(deltas) if len(deltas) == len(now) else None


def went_down(now: EngineReading, before: EngineReading) -> bool:
    """A counter or histogram of ``now`` below ``before``'s: the engine restarted in between."""
    for name, value in now.counters.items():
        if name in before.counters and value < before.counters[name]:
            return True
    for name, buckets in now.histograms.items():
        previous = before.histograms.get(name)
        if previous is not None and (buckets[-1][1] < previous[-1][1] or bucket_deltas(buckets, previous) is None):
            return True
    return False


class EngineWindow:
    """The scrapes of one engine within the last ``window_ms`` (monotonic ms), oldest first."""

    def __init__(self, window_ms):
        self.window_ms = window_ms
        self._scrapes = deque()

    def add(self, at_ms, reading: EngineReading):
        if self._scrapes and went_down(reading, self._scrapes[-1][1]):
            self._scrapes.clear()
        self._scrapes.append((at_ms, reading))
        while self._scrapes[0][0] < at_ms - self.window_ms:
            self._scrapes.popleft()

    def base(self):
        """``(elapsed_ms, oldest reading)`` to difference against, or None with a single scrape."""
        if len(self._scrapes) < 2:
            return None
        (first_at, first), (last_at, _) = self._scrapes[0], self._scrapes[-1]
        return last_at - first_at, first


def _ratio(part, whole):
    return None if part is None or not whole else round(part / whole, 4)


def windowed_figures(reading: EngineReading, base) -> dict:
    """The figures that need two scrapes; every one None without a base."""
    if base is None:
        return dict.fromkeys(("prefix_cache_hit_ratio", "preemptions", "prompt_tokens_per_s",
                              "generation_tokens_per_s", "ttft_p50_s", "ttft_p95_s", "itl_p50_s"))
    elapsed_ms, before = base

    def delta(name):
        if name not in reading.counters or name not in before.counters:
            return None
        return reading.counters[name] - before.counters[name]

    def per_second(name):
        change = delta(name)
        return None if change is None or elapsed_ms <= 0 else round(change * 1000.0 / elapsed_ms, 2)

    deltas = {name: bucket_deltas(buckets, before.histograms.get(name))
              for name, buckets in reading.histograms.items()}

    def quantile(name, q):
        value = histogram_quantile(q, deltas.get(name))
        return None if value is None else round(value, 6)

    preemptions = delta("preemptions")
    return {
        "prefix_cache_hit_ratio": _ratio(delta("prefix_hits"), delta("prefix_queries")),
        "preemptions": None if preemptions is None else int(round(preemptions)),
        "prompt_tokens_per_s": per_second("prompt_tokens"),
        "generation_tokens_per_s": per_second("generation_tokens"),
        "ttft_p50_s": quantile("ttft", 0.5),
        "ttft_p95_s": quantile("ttft", 0.95),
        "itl_p50_s": quantile("itl", 0.5),
    }


FIGURES = ("requests_running", "requests_waiting", "kv_cache_usage_ratio", "kv_cache_capacity_tokens",
           "prefix_cache_hit_ratio", "preemptions", "prompt_tokens_per_s", "generation_tokens_per_s",
           "ttft_p50_s", "ttft_p95_s", "itl_p50_s")


class EngineTracker:
    """The engines behind one URL across scrapes: their windows and the identities last seen.

    ``observe(text, ...)`` takes a scrape's body, ``failed(status, ...)`` a
    scrape that gave none; both return the URL's engine objects (SPEC 13). A
    failed scrape keeps the objects of the engines last seen, with every
    figure null, never the previous values.
    """

    def __init__(self, url, window_ms=10_000):
        self.url = url
        self.window_ms = window_ms
        self._windows = {}
        self._known = [(None, None)]
        self._kind = None

    def observe(self, text, at_ms, scraped_at_ms, scrape_ms):
        """Objects from a scrape's body (``at_ms`` monotonic, ``scraped_at_ms`` wall time)."""
        prefix = metric_prefix(text, [sources.prefix for sources in KINDS])
        if prefix is None:
            return self.failed(BAD_FORMAT, "no vllm: or sglang: metrics in the answer", scraped_at_ms, scrape_ms)
        sources = next(kind for kind in KINDS if kind.prefix == prefix)
        try:
            readings = read_engines(sources, parse_samples(text, sources.wanted))
        except ExpositionError as error:
            return self.failed(BAD_FORMAT, str(error), scraped_at_ms, scrape_ms)
        return self.observe_readings(sources, readings, at_ms, scraped_at_ms, scrape_ms)

    def observe_readings(self, sources, readings, at_ms, scraped_at_ms, scrape_ms):
        """Objects from a scrape already read into ``EngineReading``s (the simulator's engines start here)."""
        self._kind = sources.kind
        self._known = [(reading.model, reading.engine_index) for reading in readings]
        windows = {}
        objects = []
        for reading in readings:
            key = (reading.model, reading.engine_index)
            window = windows[key] = self._windows.get(key) or EngineWindow(self.window_ms)
            window.add(at_ms, reading)
            figures = windowed_figures(reading, window.base())
            if sources.hit_rate:
                figures["prefix_cache_hit_ratio"] = reading.hit_rate
            objects.append(self._object(sources.kind, key, OK, None, scraped_at_ms, scrape_ms, {
                "requests_running": reading.requests_running,
                "requests_waiting": reading.requests_waiting,
                "kv_cache_usage_ratio": reading.kv_cache_usage_ratio,
                "kv_cache_capacity_tokens": reading.kv_cache_capacity_tokens,
                **figures,
            }, reading.lora, reading.sleeping))
        self._windows = windows  # engines that went away take their windows with them
        return objects

    def failed(self, status, error, scraped_at_ms, scrape_ms):
        kind = None if status == BAD_FORMAT else self._kind
        return [self._object(kind, key, status, error, scraped_at_ms, scrape_ms, {}, None, None)
                for key in self._known]

    def _object(self, kind, key, status, error, scraped_at_ms, scrape_ms, figures, lora, sleeping):
        return {
            "url": self.url,
            "kind": kind,
            "model": key[0],
            "engine_index": key[1],
            "status": status,
            "error": error,
            "scraped_at_ms": scraped_at_ms,
            "scrape_ms": None if scrape_ms is None else round(scrape_ms, 2),
            **{name: figures.get(name) for name in FIGURES},
            "window_ms": self.window_ms,
            "lora": lora,
            "sleeping": sleeping,
        }

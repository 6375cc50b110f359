"""One engine of a simulated vLLM server: its queue, its batch, its KV cache and the figures it exports.

Pure, no network, no clock: ``simulator.engines.SimulatedEngine`` runs one
per data-parallel rank and hands each step its arrivals (see that module for
the model as a whole).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import deque
from itertools import accumulate
from random import Random

from agent.engines.reading import EngineReading

# vLLM 0.32's bucket bounds of vllm:time_to_first_token_seconds and vllm:inter_token_latency_seconds.
TTFT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
               20.0, 40.0, 80.0, 160.0, 640.0, 2560.0, math.inf)
ITL_BOUNDS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
              40.0, 80.0, math.inf)
GIVE_UP_S = 300.0  # a client waits this long in the queue, then goes away
LENGTH_SIGMA = 0.6  # spread of prompt and output lengths (log-normal)
ITL_SPREAD = ((0.8, 0.3), (1.0, 0.45), (1.3, 0.25))  # token gaps around the batch's mean: (factor, share)
# Fields of a running request (a list, for speed); ROUTED is its ``RoutedRequest`` (None for a synthetic one).
PROMPT, OUTPUT, GENERATED, ADAPTER, ROUTED = range(5)
# Fields of a waiting entry: [arrival wall ms, requests] or, routed, [arrival wall ms, 1, RoutedRequest].
ARRIVED, COUNT, REQUEST = range(3)
COUNTERS = ("prompt_tokens", "generation_tokens", "prefix_hits", "prefix_queries", "preemptions")


def poisson(rng: Random, mean):
    """A Poisson draw: Knuth's product method for small means, the normal approximation above 30."""
    if mean <= 0.0:
        return 0
    if mean > 30.0:
        return max(0, int(rng.gauss(mean, math.sqrt(mean)) + 0.5))
    limit, count, product = math.exp(-mean), 0, rng.random()
    while product > limit:
        count += 1
        product *= rng.random()
    return count


class EngineRank:
    """One engine of a server (all of it, without data parallelism): its queue, batch and KV cache."""

    def __init__(self, server, index, gpu_count):
        self.server = server
        self.rng = server.rng
        self.index = index
        self.gpu_count = gpu_count
        self.cache = None  # a PrefixCache (simulator.prefix_cache) when the server keeps one for routed prompts
        self.max_num_seqs = gpu_count * server.seqs_per_gpu
        self.prefill_tokens_per_s = 8000.0 * gpu_count ** 0.7 * server.prefill_factor
        self.size_for(server.prompt_mean, server.output_mean)
        service_s = server.output_mean * server.itl_s * 1.6 + server.prompt_mean / self.prefill_tokens_per_s
        self.service_rate = self.max_num_seqs / service_s  # requests a second it finishes when full
        self.given_up = 0  # requests that left the queue unserved, for tests
        self.reset()

    def size_for(self, prompt_mean, output_mean):
        """The KV cache sized so that a full batch of requests of these mean lengths fills 60–100 % of it."""
        full_batch = self.max_num_seqs * (prompt_mean + output_mean / 2)
        self.capacity_tokens = 16 * max(1, round(full_batch * self.server.cache_factor / 16))

    def crash(self):
        """The vLLM process died: every routed request it held fails, and it starts again empty."""
        for entry in self.waiting:
            if len(entry) > REQUEST:
                entry[REQUEST].fail()
        for request in [*self.running, *self.preempted]:
            if request[ROUTED] is not None:
                request[ROUTED].fail()
        if self.cache is not None:
            self.cache.clear()  # a new process: its KV cache is empty
        self.reset()

    def reset(self):
        """A vLLM process starting: nothing queued or running, counters from zero."""
        self.waiting = deque()  # [arrival wall ms, requests], oldest first
        self.waiting_count = 0
        self.preempted = []  # running requests pushed back to the queue's head
        self.running = []
        self.kv_used = 0.0
        self.prefill_free_ms = 0.0  # with a prefix cache: when the prefills started so far are done
        self.counters = dict.fromkeys(COUNTERS, 0.0)
        self.ttft_counts = [0] * len(TTFT_BOUNDS)
        self.itl_counts = [0] * len(ITL_BOUNDS)

    @property
    def requests_waiting(self):
        return self.waiting_count + len(self.preempted)

    @property
    def queued(self):
        """Requests it holds, running or waiting (what the server balances on)."""
        return len(self.running) + self.waiting_count + len(self.preempted)

    def step(self, now_ms, dt_s, arrivals):
        self._decode(now_ms, dt_s)
        self._give_up(now_ms)
        self._admit(now_ms, arrivals)

    def _decode(self, now_ms, dt_s):
        """Every running request generates for ``dt_s``; finished ones leave; an overfull cache preempts."""
        running = self.running
        if not running:
            return
        itl = self.server.itl_s * (1.0 + 0.6 * len(running) / self.max_num_seqs)  # a fuller batch decodes slower
        tokens = dt_s / itl
        generated, still = 0.0, []
        prefilling = self.prefill_free_ms if self.cache is not None else 0.0  # decodes wait for their prefill
        for request in running:
            if prefilling > now_ms and request[ROUTED] is not None and request[ROUTED].first_token_ms > now_ms:
                still.append(request)
                continue
            step = min(tokens, request[OUTPUT] - request[GENERATED])
            request[GENERATED] += step
            generated += step
            if request[GENERATED] < request[OUTPUT]:
                still.append(request)
            elif request[ROUTED] is not None:
                if self.cache is not None:  # vLLM keeps the blocks the answer filled, too
                    self.cache.store(request[ROUTED].answer_keys, now_ms)
                request[ROUTED].finish(now_ms)
        self.running = still
        self.kv_used = sum(request[PROMPT] + request[GENERATED] for request in still)
        while self.kv_used > self.capacity_tokens and len(still) > 1:
            request = still.pop()  # vLLM preempts the newest request and recomputes it later
            self.kv_used -= request[PROMPT] + request[GENERATED]
            self.preempted.append(request)
            self.counters["preemptions"] += 1
        self.counters["generation_tokens"] += round(generated)
        jitter = itl * (0.9 + 0.2 * self.rng.random())
        for factor, share in ITL_SPREAD:
            self.itl_counts[bisect_left(ITL_BOUNDS, jitter * factor)] += round(generated * share)

    def _give_up(self, now_ms):
        waiting, oldest = self.waiting, now_ms - GIVE_UP_S * 1000.0
        while waiting and waiting[0][ARRIVED] < oldest:
            entry = waiting.popleft()
            self.waiting_count -= entry[COUNT]
            self.given_up += entry[COUNT]
            if len(entry) > REQUEST:
                entry[REQUEST].fail()

    def _fits(self, tokens):
        return not self.running or self.kv_used + tokens <= self.capacity_tokens

    def _admit(self, now_ms, arrivals):
        """Preempted requests first, then the queue oldest first, then this step's arrivals; the rest wait."""
        running, free = self.running, self.max_num_seqs - len(self.running)
        while self.preempted and free > 0 and self._fits(self.preempted[-1][PROMPT] + self.preempted[-1][GENERATED]):
            request = self.preempted.pop()
            running.append(request)
            self.kv_used += request[PROMPT] + request[GENERATED]
            free -= 1
        waiting = self.waiting
        while waiting and free > 0:
            group = waiting[0]
            routed = group[REQUEST] if len(group) > REQUEST else None
            if routed is not None and routed.abandoned:  # its client went away: vLLM aborts it
                waiting.popleft()
                self.waiting_count -= 1
                continue
            if not self._start(max(0.0, (now_ms - group[ARRIVED]) / 1000.0), now_ms, routed):
                break  # the cache is full: the queue waits, and so do the newcomers
            free -= 1
            group[COUNT] -= 1
            self.waiting_count -= 1
            if group[COUNT] == 0:
                waiting.popleft()
        while arrivals and free > 0 and not waiting and self._start(0.0, now_ms):
            arrivals -= 1
            free -= 1
        self._queue(now_ms, arrivals)

    def _queue(self, now_ms, arrivals):
        if arrivals:
            self.waiting.append([now_ms - 500.0, arrivals])  # they came, on average, half a step ago
            self.waiting_count += arrivals

    def submit(self, request, now_ms):
        """Queue one routed request (``RoutedRequest``) arriving at ``now_ms`` and start what fits."""
        self.waiting.append([now_ms, 1, request])
        self.waiting_count += 1
        self._admit(now_ms, 0)

    def _start(self, waited_s, now_ms, routed=None):
        """Start one request that waited ``waited_s``, if its prompt fits the cache; observe its TTFT.

        A routed request brings its own lengths; a synthetic one draws them.
        """
        rng, cap = self.rng, self.capacity_tokens / 4
        server = self.server
        if routed is not None:
            prompt, output = routed.prompt_tokens, routed.output_tokens
        else:
            prompt = round(min(cap, rng.lognormvariate(math.log(server.prompt_mean) - LENGTH_SIGMA ** 2 / 2,
                                                       LENGTH_SIGMA)))
        if not self._fits(prompt):
            return False
        if routed is None:
            output = max(1, round(min(cap, rng.lognormvariate(
                math.log(server.output_mean) - LENGTH_SIGMA ** 2 / 2, LENGTH_SIGMA))))
        adapter = server.adapter is not None and rng.random() < 0.3
        self.running.append([prompt, output, 1.0, adapter, routed])  # the prefill gives the first token
        self.kv_used += prompt + 1
        counters = self.counters
        counters["prompt_tokens"] += prompt
        counters["generation_tokens"] += 1
        counters["prefix_queries"] += prompt
        if routed is not None and self.cache is not None:
            return self._prefill_cached(routed, prompt, waited_s, now_ms)
        counters["prefix_hits"] += round(prompt * min(1.0, server.hit_share * (0.5 + rng.random())))
        prefill_s = 0.01 + prompt / self.prefill_tokens_per_s
        self.ttft_counts[bisect_left(TTFT_BOUNDS, waited_s + prefill_s)] += 1
        if routed is not None:
            routed.first_token(now_ms + prefill_s * 1000.0)
        return True

    def _prefill_cached(self, routed, prompt, waited_s, now_ms):
        """A routed prompt on an engine with a prefix cache: only the tokens past its cached prefix are
        computed, and the engine's prefills go one after another (one token budget a step, as vLLM's
        chunked prefill shares it), so a long uncached prompt delays the next one's first token too."""
        cached = self.cache.lookup(routed.keys, prompt)
        self.cache.store(routed.keys, now_ms)
        routed.cached_tokens = cached
        self.counters["prefix_hits"] += cached
        start_ms = max(now_ms, self.prefill_free_ms)
        first_ms = self.prefill_free_ms = start_ms + (0.01 + (prompt - cached) / self.prefill_tokens_per_s) * 1000.0
        self.ttft_counts[bisect_left(TTFT_BOUNDS, waited_s + (first_ms - now_ms) / 1000.0)] += 1
        routed.first_token(first_ms)
        return True

    def reading(self) -> EngineReading:
        """What a scrape of the server's ``/metrics`` says of this engine now, as the agent reads it."""
        adapter, lora = self.server.adapter, None
        if adapter is not None:
            running = [adapter] if any(request[ADAPTER] for request in self.running) else []
            waiting = [adapter] if self.requests_waiting * 0.3 >= 0.5 else []
            lora = {"max": 4, "running": running, "waiting": waiting}
        return EngineReading(
            model=self.server.model, engine_index=self.index,
            requests_running=len(self.running), requests_waiting=self.requests_waiting,
            kv_cache_usage_ratio=round(min(1.0, self.kv_used / self.capacity_tokens), 4),
            kv_cache_capacity_tokens=self.capacity_tokens, lora=lora, sleeping=False,
            counters=dict(self.counters),
            histograms={"ttft": tuple(zip(TTFT_BOUNDS, accumulate(self.ttft_counts))),
                        "itl": tuple(zip(ITL_BOUNDS, accumulate(self.itl_counts)))},
        )

"""Synthetic serving engines: a vLLM server on a simulated host, as a queue (pure, no network, no clock).

Each GPU host runs one vLLM server over all its GPUs, which the agent would
scrape at ``ENGINE_URL``: one engine over every GPU (tensor parallel) or, on
a share of the larger hosts, two data-parallel engines (labelled ``0`` and
``1``) of half the GPUs each, the server sending each request to the engine
that holds fewer.

Requests arrive at a rate that follows the host's load level (a seeded
mean-reverting walk) and the server's own bursts; an engine runs at most
``max_num_seqs`` of them at once (4–8 per GPU) while their KV cache fits,
and the rest wait. Waiting grows while arrivals exceed what the engine
finishes and drains otherwise; time to first token is the time waited plus
the prefill; KV usage is the prompt and the tokens generated so far of every
running request over the cache's capacity, and a batch that outgrows its
cache has its newest request preempted, as vLLM does. Waiting requests give
up after ``GIVE_UP_S``. Time is the caller's: ``advance(now_ms, load)`` runs
the server up to the wall time of the snapshot. In the routing benchmark a
server serves only the requests routed to it (``submit``), each one telling
its ``RoutedRequest`` when its first token and its last come.

What the engine exports (gauges, cumulative counters, histogram buckets) is
read by the agent's own ``EngineTracker`` into SPEC 13's objects: the same
windows, deltas, quantiles, keys and order as a real agent's, and the same
null figures on a first scrape or after a failed one.

Engines fail as a two-state chain whose long-run share is
``FleetProfile.engine_fault_share``: a ``/metrics`` that hangs (``timeout``),
answers an error (``http_error``) or a server that is down (``unreachable``;
it restarts with empty queues and counters from zero). Every random choice
comes from the engine's own stream, so turning engines off leaves the rest
of the host's figures as they were, but for its GPUs: they follow how full
the batches are (``busy``) where that is above the host's load.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import deque
from itertools import accumulate
from random import Random

from agent.engines.figures import HTTP_ERROR, TIMEOUT, UNREACHABLE, EngineTracker
from agent.engines.reading import VLLM, EngineReading

ENGINE_URL = "http://127.0.0.1:8000"
DATA_PARALLEL_SHARE = 0.25  # of the hosts with 4 GPUs or more: two engines of half the GPUs each
WINDOW_MS = 10_000  # the agent's default window
SCRAPE_TIMEOUT_MS = 500  # the agent's default scrape timeout
# vLLM 0.32's bucket bounds of vllm:time_to_first_token_seconds and vllm:inter_token_latency_seconds.
TTFT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
               20.0, 40.0, 80.0, 160.0, 640.0, 2560.0, math.inf)
ITL_BOUNDS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
              40.0, 80.0, math.inf)
GIVE_UP_S = 300.0  # a client waits this long in the queue, then goes away
MAX_STEP_S = 2.0  # longer gaps (a stale spell) are simulated in steps of at most this
MAX_GAP_S = 120.0  # and at most this much of a gap
LENGTH_SIGMA = 0.6  # spread of prompt and output lengths (log-normal)
ITL_SPREAD = ((0.8, 0.3), (1.0, 0.45), (1.3, 0.25))  # token gaps around the batch's mean: (factor, share)
FAULTS = (TIMEOUT, UNREACHABLE, HTTP_ERROR)
FAULT_WEIGHTS = (2.0, 2.0, 1.0)
FAULT_ERRORS = {
    TIMEOUT: f"no answer within {SCRAPE_TIMEOUT_MS} ms",
    UNREACHABLE: "ConnectionRefusedError: [Errno 111] Connection refused",
    HTTP_ERROR: "HTTP 503 Service Unavailable",
}
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


def chain_step(rng: Random, ill, share, mean_s, dt_s):
    """``(ill now, changed)`` of a two-state chain whose long-run ill share is ``share``."""
    recover = min(1.0, dt_s / mean_s)
    if ill:
        return (False, True) if rng.random() < recover else (True, False)
    fall = min(1.0, recover * share / (1.0 - share)) if share < 1.0 else 1.0
    return (True, True) if rng.random() < fall else (False, False)


def host_engine(seed, index, shape, profile, capabilities):
    """The vLLM server of a host of ``shape``, or None (engines off, no GPUs).

    Serves the host's model and, when its capabilities list an adapter, that
    LoRA adapter; a data-parallel server's layout is written into the
    capabilities' ``parallelism``, so the two say the same.
    """
    if not profile.engines or not shape.gpu_count:
        return None
    layout = Random(f"fleetwatch-simulator-layout:{seed}:{index}")
    data_parallel = 2 if shape.gpu_count >= 4 and layout.random() < DATA_PARALLEL_SHARE else 1
    adapters = capabilities["adapters"] if capabilities else []
    engine = SimulatedEngine(seed, index, shape.model, shape.gpu_count, profile,
                             adapters[0]["identifier"] if adapters else None, data_parallel)
    if capabilities and data_parallel > 1:
        capabilities["parallelism"].update(tensor_parallel_size=shape.gpu_count // data_parallel,
                                           data_parallel_size=data_parallel)
    return engine


class EngineRank:
    """One engine of a server (all of it, without data parallelism): its queue, batch and KV cache."""

    def __init__(self, server, index, gpu_count):
        self.server = server
        self.rng = server.rng
        self.index = index
        self.max_num_seqs = gpu_count * server.seqs_per_gpu
        self.prefill_tokens_per_s = 8000.0 * gpu_count ** 0.7 * server.prefill_factor
        # Sized so that a full batch of average requests fills 60–100 % of the cache.
        full_batch = self.max_num_seqs * (server.prompt_mean + server.output_mean / 2)
        self.capacity_tokens = 16 * max(1, round(full_batch * server.cache_factor / 16))
        service_s = server.output_mean * server.itl_s * 1.6 + server.prompt_mean / self.prefill_tokens_per_s
        self.service_rate = self.max_num_seqs / service_s  # requests a second it finishes when full
        self.given_up = 0  # requests that left the queue unserved, for tests
        self.reset()

    def crash(self):
        """The vLLM process died: every routed request it held fails, and it starts again empty."""
        for entry in self.waiting:
            if len(entry) > REQUEST:
                entry[REQUEST].fail()
        for request in [*self.running, *self.preempted]:
            if request[ROUTED] is not None:
                request[ROUTED].fail()
        self.reset()

    def reset(self):
        """A vLLM process starting: nothing queued or running, counters from zero."""
        self.waiting = deque()  # [arrival wall ms, requests], oldest first
        self.waiting_count = 0
        self.preempted = []  # running requests pushed back to the queue's head
        self.running = []
        self.kv_used = 0.0
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
        for request in running:
            step = min(tokens, request[OUTPUT] - request[GENERATED])
            request[GENERATED] += step
            generated += step
            if request[GENERATED] < request[OUTPUT]:
                still.append(request)
            elif request[ROUTED] is not None:
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
        counters["prefix_hits"] += round(prompt * min(1.0, server.hit_share * (0.5 + rng.random())))
        prefill_s = 0.01 + prompt / self.prefill_tokens_per_s
        self.ttft_counts[bisect_left(TTFT_BOUNDS, waited_s + prefill_s)] += 1
        if routed is not None:
            routed.first_token(now_ms + prefill_s * 1000.0)
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


class SimulatedEngine:
    """One host's vLLM server: its engines, the requests it receives, its faults, what the agent reads."""

    def __init__(self, seed, index, model, gpu_count, profile, adapter=None, data_parallel=1):
        rng = self.rng = Random(f"fleetwatch-simulator-engine:{seed}:{index}")
        self.model = model
        self.profile = profile
        self.adapter = adapter  # a LoRA adapter it serves (with vLLM's LoRA info), or None
        # The traffic and the configuration, the same for each of its engines.
        self.seqs_per_gpu = rng.randint(4, 8)  # max_num_seqs per GPU
        self.prompt_mean = rng.uniform(400.0, 3000.0)
        self.output_mean = rng.uniform(150.0, 600.0)
        self.itl_s = rng.uniform(0.015, 0.045)  # per token, for a lone request
        self.prefill_factor = rng.uniform(0.7, 1.3)
        self.cache_factor = rng.uniform(1.0, 1.6)
        self.hit_share = rng.uniform(0.05, 0.6)  # prompt tokens its prefix cache holds, on average
        self.ranks = [EngineRank(self, str(n), gpu_count // data_parallel) for n in range(data_parallel)]
        self.service_rate = sum(rank.service_rate for rank in self.ranks)
        self.fault = None
        self.dead = False  # killed for good (``kill``): no recovery
        self.routed_only = False  # serves only what is routed to it (``submit``): no synthetic arrivals
        self.burst_left_s, self.burst_factor = 0.0, 1.0
        self._last_ms = None
        self.tracker = EngineTracker(ENGINE_URL, WINDOW_MS)
        # What happened, for tests.
        self.bursts = 0
        self.faults = 0
        if rng.random() < profile.engine_fault_share:  # start in the long-run state
            self._fall_ill()

    def agent_restarted(self):
        """A new agent process: its tracker has no windows yet (the server itself runs on)."""
        self.tracker = EngineTracker(ENGINE_URL, WINDOW_MS)

    @property
    def requests_waiting(self):
        return sum(rank.requests_waiting for rank in self.ranks)

    @property
    def busy(self):
        """How full its batches are (0–1): what its GPUs' utilisation follows, above the host's load."""
        return sum(len(rank.running) / rank.max_num_seqs for rank in self.ranks) / len(self.ranks)

    def advance(self, now_ms, load):
        """Run the server up to wall time ``now_ms`` at the host's ``load`` (0–1)."""
        if self._last_ms is None:
            gap_s = 1.0
        else:
            gap_s = min(MAX_GAP_S, max(0.0, (now_ms - self._last_ms) / 1000.0))
        self._last_ms = now_ms
        if gap_s <= 0.0:
            return
        self._step_fault(gap_s)
        steps = math.ceil(gap_s / MAX_STEP_S)
        for step in range(steps, 0, -1):
            if self.fault != UNREACHABLE:  # a server that is down serves nothing
                self._step(now_ms - (step - 1) * gap_s * 1000.0 / steps, gap_s / steps, load)

    # --- routed requests (the routing benchmark) -------------------------------------

    def submit(self, request, now_ms):
        """A routed request reaches the server at ``now_ms``: False when nothing listens (it is down)."""
        self.advance(now_ms, 0.0)
        if self.fault == UNREACHABLE:
            return False
        ranks = self.ranks
        rank = min(ranks, key=lambda r: r.queued) if len(ranks) > 1 else ranks[0]
        rank.submit(request, now_ms)
        return True

    def kill(self):
        """The server dies for good: what it held fails, its port refuses, its scrape says unreachable."""
        self.dead = True
        self.fault = UNREACHABLE
        self.faults += 1
        for rank in self.ranks:
            rank.crash()

    def slow_down(self, factor):
        """Prefill and decode ``factor`` times slower from now (a throttled or degraded board)."""
        self.itl_s *= factor
        for rank in self.ranks:
            rank.prefill_tokens_per_s /= factor

    def _step_fault(self, dt_s):
        if self.dead:
            return
        profile = self.profile
        ill, changed = chain_step(self.rng, self.fault is not None, profile.engine_fault_share,
                                  profile.engine_fault_mean_s, dt_s)
        if changed:
            if ill:
                self._fall_ill()
            else:
                self.fault = None

    def _fall_ill(self):
        self.fault = self.rng.choices(FAULTS, FAULT_WEIGHTS)[0]
        self.faults += 1
        if self.fault == UNREACHABLE:
            for rank in self.ranks:
                rank.crash()  # the server died: its queues and counters with it

    def _step(self, now_ms, dt_s, load):
        rng = self.rng
        if self.burst_left_s > 0.0:
            self.burst_left_s -= dt_s
        elif rng.random() < min(1.0, self.profile.engine_bursts_per_hour * dt_s / 3600.0):
            self.burst_left_s, self.burst_factor = rng.uniform(20.0, 120.0), rng.uniform(1.5, 3.0)
            self.bursts += 1
        burst = self.burst_factor if self.burst_left_s > 0.0 else 1.0
        arrivals = 0 if self.routed_only else poisson(rng, self.service_rate * load * burst * dt_s)
        ranks = self.ranks
        if len(ranks) == 1:
            ranks[0].step(now_ms, dt_s, arrivals)
            return
        shares = [rank.queued for rank in ranks]
        for _ in range(arrivals):  # each to the engine holding fewer requests
            shares[shares.index(min(shares))] += 1
        for rank, share in zip(ranks, shares):
            rank.step(now_ms, dt_s, share - rank.queued)

    def objects(self, timestamp_ms) -> list:
        """The snapshot's ``engines`` entries (one per engine) for a snapshot taken at ``timestamp_ms``."""
        rng = self.rng
        scraped_at_ms = timestamp_ms - rng.randint(1, 5)  # the agent asks at the start of its tick
        if self.fault is None:
            readings = [rank.reading() for rank in self.ranks]
            return self.tracker.observe_readings(VLLM, readings, scraped_at_ms, scraped_at_ms, rng.uniform(1.0, 6.0))
        scrape_ms = None if self.fault == TIMEOUT else rng.uniform(0.1, 2.0)
        return self.tracker.failed(self.fault, FAULT_ERRORS[self.fault], scraped_at_ms, scrape_ms)

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
from random import Random

from agent.engines.figures import HTTP_ERROR, TIMEOUT, UNREACHABLE, EngineTracker
from agent.engines.reading import VLLM
from simulator.engine_rank import EngineRank, poisson
from simulator.prefix_cache import PrefixCache

ENGINE_URL = "http://127.0.0.1:8000"
DATA_PARALLEL_SHARE = 0.25  # of the hosts with 4 GPUs or more: two engines of half the GPUs each
WINDOW_MS = 10_000  # the agent's default window
SCRAPE_TIMEOUT_MS = 500  # the agent's default scrape timeout
MAX_STEP_S = 2.0  # longer gaps (a stale spell) are simulated in steps of at most this
MAX_GAP_S = 120.0  # and at most this much of a gap
FAULTS = (TIMEOUT, UNREACHABLE, HTTP_ERROR)
FAULT_WEIGHTS = (2.0, 2.0, 1.0)
FAULT_ERRORS = {
    TIMEOUT: f"no answer within {SCRAPE_TIMEOUT_MS} ms",
    UNREACHABLE: "ConnectionRefusedError: [Errno 111] Connection refused",
    HTTP_ERROR: "HTTP 503 Service Unavailable",
}


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


class SimulatedEngine:
    """One host's vLLM server: its engines, the requests it receives, its faults, what the agent reads."""

    def __init__(self, seed, index, model, gpu_count, profile, adapter=None, data_parallel=1):
        rng = self.rng = Random(f"fleetwatch-simulator-engine:{seed}:{index}")
        self.model = model
        self.profile = profile
        self.adapter = adapter  # a LoRA adapter it serves (with vLLM's LoRA info), or None
        # What its /v1/models lists (SPEC 16.1): the model from its directory, and the adapter on it.
        self.served = [{"id": model, "root": f"/models/{model}", "parent": None}] + (
            [{"id": adapter, "root": f"/adapters/{adapter}", "parent": model}] if adapter else [])
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
        self.publishes = None  # with a prefix cache: True when its events are read and sent (SPEC 15.2)
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

    def keep_prefix_cache(self, tokens_per_gpu, block_tokens, publishes=True):
        """Each engine keeps a prefix cache of ``tokens_per_gpu`` per GPU for routed prompts; with
        ``publishes`` its events reach the Proxy (``kv_events`` ok), else it publishes none (null)."""
        for rank in self.ranks:
            rank.cache = PrefixCache(tokens_per_gpu * rank.gpu_count // block_tokens, block_tokens)
        self.publishes = publishes

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
            objects = self.tracker.observe_readings(VLLM, readings, scraped_at_ms, scraped_at_ms,
                                                    rng.uniform(1.0, 6.0))
        else:
            scrape_ms = None if self.fault == TIMEOUT else rng.uniform(0.1, 2.0)
            objects = self.tracker.failed(self.fault, FAULT_ERRORS[self.fault], scraped_at_ms, scrape_ms)
        for obj, rank in zip(objects, self.ranks):  # SPEC 15.2: null where no event publisher is read
            obj["served"] = self.served
            obj["kv_events"] = rank.cache.kv_events(scraped_at_ms) if self.publishes else None
        return objects

"""The routing benchmark's workload: its fleet, its arrivals, its faults and what a policy scored (pure).

The same seed gives the same fleet and the same arrival sequence for every
policy, so the policies are compared on one workload. Time here is seconds
from the start of the routed traffic (the caller adds the wall clock):

- **The fleet**: ``hosts`` hosts whose GPU counts cycle through
  ``gpu_counts`` (1, 2, 4, 8 by default), every one serving ``MODEL``;
  their vLLM servers keep their own seeded configuration (4–8 sequences a
  GPU, decode and prefill speeds, KV cache) and serve only what is routed to
  them.
- **Unhealthy GPUs**: ``unhealthy_hosts`` hosts have one board with
  uncorrected ECC errors (health ``error``) from the start; their engines
  run ``unhealthy_slowdown`` times slower (the tensor-parallel group waits
  on the retired pages and resets of that board).
- **A host that turns slow**: at ``slow_at`` its engine runs
  ``slow_factor`` times slower (a thermal or power cap).
- **A host whose engine dies**: at ``dead_at`` its vLLM server exits: what
  it held fails, new requests are refused, its scrapes say ``unreachable``.
- **Arrivals**: a Poisson stream at ``load`` × the healthy fleet's service
  rate (what its engines finish a second when full of requests of the
  workload's mean lengths), with log-normal prompt and output lengths.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from random import Random

from simulator.prompts import NO_PREFIX, SHARED_PREFIX, PromptWorkload

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
LENGTH_SIGMA = 0.6  # spread of prompt and output lengths (log-normal)
# How long after a host failed a request sent to it still counts as the router's honest ignorance.
FAILED_HOST_GRACE_S = 2.0
MIXED = "mixed"  # issue 19's workload: lengths only, no prompts, no prefix cache
WORKLOADS = (MIXED, SHARED_PREFIX, NO_PREFIX)


@dataclass(frozen=True)
class RoutingWorkload:
    """The documented workload of ``simulate_fleet --routing-benchmark`` (docs/simulator.md)."""

    seed: int = 0
    hosts: int = 12
    gpu_counts: tuple = (1, 2, 4, 8)
    duration_s: float = 60.0  # of routed traffic, per policy
    load: float = 0.7  # of the healthy fleet's service rate
    prompt_mean: float = 1000.0
    output_mean: float = 200.0
    unhealthy_hosts: int = 2
    unhealthy_slowdown: float = 3.0
    slow_factor: float = 4.0
    slow_at_share: float = 0.25  # of the duration
    dead_at_share: float = 0.5
    ttft_timeout_s: float = 20.0  # a client waits this long for its first token, then gives up
    prompts: PromptWorkload | None = None  # token prompts and engines with a prefix cache; None: issue 19's
    cache_tokens_per_gpu: int = 12_000  # with prompts: the prefix cache's size, per GPU of the engine

    @classmethod
    def of(cls, kind=MIXED, **fields):
        """The workload called ``kind`` (``WORKLOADS``), with ``fields`` over its defaults."""
        if kind == MIXED:
            return cls(**fields)
        prompts = PromptWorkload(kind=kind)
        return cls(**{"prompts": prompts, "prompt_mean": prompts.prompt_mean,
                      "output_mean": float(prompts.answer_mean), **fields})

    @property
    def kind(self):
        return MIXED if self.prompts is None else self.prompts.kind

    def with_seed(self, seed):
        return replace(self, seed=seed)

    @property
    def slow_at(self):
        return self.duration_s * self.slow_at_share

    @property
    def dead_at(self):
        return self.duration_s * self.dead_at_share

    def roles(self):
        """``{host index: role}`` for the hosts with one: ``unhealthy``, ``slow``, ``dead``.

        Picked by the seed: the unhealthy and the slow among hosts of two GPUs
        or more (a one-GPU host whose one board is in error has no engine left
        to slow down), the dead among the others; never two roles on one host.
        """
        rng = Random(f"fleetwatch-routing-roles:{self.seed}")
        multi = [i for i in range(self.hosts) if self.gpu_count(i) > 1]
        picked = rng.sample(multi, min(len(multi), self.unhealthy_hosts + 1))
        roles = {index: "unhealthy" for index in picked[:self.unhealthy_hosts]}
        if picked[self.unhealthy_hosts:]:
            roles[picked[self.unhealthy_hosts]] = "slow"
        rest = [i for i in range(self.hosts) if i not in roles]
        if rest:
            roles[rng.choice(rest)] = "dead"
        return roles

    def gpu_count(self, index):
        return self.gpu_counts[index % len(self.gpu_counts)]

    def rate_per_s(self, service_rates):
        """Arrivals a second: ``load`` × the sum of ``service_rates`` (requests a second, by host index)
        over the hosts that stay healthy all run."""
        roles = self.roles()
        return self.load * sum(rate for index, rate in service_rates.items() if index not in roles)

    def arrivals(self, rate_per_s, model=MODEL, turns=None):
        """``[(at_s, prompt, output_tokens)]``: the seeded stream over ``duration_s``; ``prompt`` is a
        length, or with ``prompts`` a ``simulator.prompts.Prompt`` (its length and keys, written by
        ``turns``: token ids by default, ``prompt_forms.turns_of``)."""
        if self.prompts is not None:
            return self.prompts.arrivals(model, self.seed, rate_per_s, self.duration_s, turns)
        rng = Random(f"fleetwatch-routing-arrivals:{self.seed}")
        at, stream = 0.0, []
        if rate_per_s <= 0.0:
            return stream
        while True:
            at += rng.expovariate(rate_per_s)
            if at >= self.duration_s:
                return stream
            prompt = max(1, round(rng.lognormvariate(math.log(self.prompt_mean) - LENGTH_SIGMA ** 2 / 2,
                                                     LENGTH_SIGMA)))
            output = max(1, round(rng.lognormvariate(math.log(self.output_mean) - LENGTH_SIGMA ** 2 / 2,
                                                     LENGTH_SIGMA)))
            stream.append((at, prompt, output))


class RoutedRequest:
    """One routed request as the engine and its client see it; times are wall ms (the engine's clock).

    The engine calls ``first_token``, ``finish`` and ``fail``; ``on_change``
    (set by the client) hears each of them.
    """

    __slots__ = ("prompt_tokens", "output_tokens", "first_token_ms", "done_ms", "failed", "abandoned",
                 "on_change", "keys", "answer_keys", "cached_tokens", "content")

    def __init__(self, prompt, output_tokens, on_change=None):
        """``prompt``: a length, or a ``simulator.prompts.Prompt`` (its length and SPEC 15.1 keys)."""
        if isinstance(prompt, int):
            self.prompt_tokens, self.keys, self.answer_keys, self.content = prompt, (), (), None
        else:
            self.prompt_tokens, self.keys, self.answer_keys = prompt.tokens, prompt.keys, prompt.answer_keys
            self.content = prompt.content  # what a body of the prompt forms but keys sends
        self.output_tokens = output_tokens
        self.cached_tokens = None  # the prompt's tokens the engine's prefix cache held (set when it started)
        self.first_token_ms = self.done_ms = None
        self.failed = self.abandoned = False
        self.on_change = on_change

    def first_token(self, at_ms):
        self.first_token_ms = at_ms
        self._changed()

    def finish(self, at_ms):
        self.done_ms = at_ms
        self._changed()

    def fail(self):
        if self.done_ms is None:
            self.failed = True
            self._changed()

    def _changed(self):
        if self.on_change is not None:
            self.on_change(self)


def quantile(sorted_values, q):
    """The ``q`` quantile (0–1) of sorted values, nearest rank; None when there are none."""
    if not sorted_values:
        return None
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


@dataclass
class PolicyScore:
    """What one policy did with the workload: counts, and the TTFT of every request served."""

    requests: int = 0
    shed: int = 0  # the Proxy said shed (429): not sent
    route_busy: int = 0  # the Proxy's route lane was full (429 route_busy, no verdict): not sent
    unavailable: int = 0  # nowhere to send it (503, or an empty instance list)
    errors: int = 0  # sent, and the engine refused it or died holding it
    timeouts: int = 0  # sent, and no first token within the workload's ttft_timeout_s
    route_errors: int = 0  # the router's own question failed (an HTTP error from the Proxy)
    sent_to_failed_host_after_grace: int = 0
    duration_s: float | None = None  # of the traffic: output tokens a second are counted over it

    def __post_init__(self):
        self.ttfts = []
        self.prompt_tokens = self.cached_tokens = 0  # of the served requests whose engine keeps a prefix cache
        self.output_tokens = 0  # of the requests whose last token came within the traffic's duration

    def served(self, ttft_s, request=None):
        """A first token, ``ttft_s`` after the arrival of ``request`` (a ``RoutedRequest``)."""
        self.ttfts.append(ttft_s)
        if request is not None and request.cached_tokens is not None:
            self.prompt_tokens += request.prompt_tokens
            self.cached_tokens += request.cached_tokens

    def completed(self, output_tokens, at_s):
        """A request's last token at ``at_s`` from the start of the traffic."""
        if self.duration_s is None or at_s <= self.duration_s:
            self.output_tokens += output_tokens

    def sent(self, at_s, failed_since_s):
        """A request sent at ``at_s`` to a host that failed at ``failed_since_s`` (None: a healthy one)."""
        if failed_since_s is not None and at_s > failed_since_s + FAILED_HOST_GRACE_S:
            self.sent_to_failed_host_after_grace += 1

    def as_row(self):
        ttfts = sorted(self.ttfts)

        def q(value):
            found = quantile(ttfts, value)
            return None if found is None else round(found, 4)

        return {
            "requests": self.requests,
            "served": len(ttfts),
            "ttft_p50_s": q(0.5),
            "ttft_p90_s": q(0.9),
            "ttft_p99_s": q(0.99),
            "shed": self.shed,
            "route_busy": self.route_busy,
            "failed": self.unavailable + self.errors + self.timeouts + self.route_errors,
            "failed_by_kind": {"unavailable": self.unavailable, "error": self.errors, "timeout": self.timeouts,
                               "route_error": self.route_errors},
            "sent_to_failed_host_after_2s": self.sent_to_failed_host_after_grace,
            "prefix_hit_ratio": round(self.cached_tokens / self.prompt_tokens, 4) if self.prompt_tokens else None,
            "output_tokens_per_s": round(self.output_tokens / self.duration_s, 1) if self.duration_s else None,
        }


def verdicts(routing, kind=MIXED):
    """The targets of workload ``kind``, checked on a ``{"<policy>": row}`` table: ``{target: True|False|None}``
    (None: not run). Issue 19's for ``mixed``; issue 32's for the prompt workloads: cache-aware placement's
    p90 at most 0.5 × load-only placement's and 0.25 × round-robin's with shared prefixes, and at most
    1.05 × load-only placement's without (no harm)."""

    def p90(name):
        row = routing.get(name)
        return None if row is None else row["ttft_p90_s"]

    def ratio_at_most(name, limit):
        ours, theirs = p90("placement"), p90(name)
        if ours is None or theirs is None:
            return None
        return ours <= limit * theirs

    if kind == SHARED_PREFIX:
        return {"placement_p90_le_0.5_placement_load": ratio_at_most("placement-load", 0.5),
                "placement_p90_le_0.25_round_robin": ratio_at_most("round-robin", 0.25)}
    if kind == NO_PREFIX:
        return {"placement_p90_le_1.05_placement_load": ratio_at_most("placement-load", 1.05)}
    placement = routing.get("placement")
    if placement is not None and not placement["served"]:
        placement = None  # nothing was placed: nothing to judge
    return {
        "placement_p90_le_0.7_round_robin": ratio_at_most("round-robin", 0.7),
        "placement_p90_le_0.9_least_inflight": ratio_at_most("least-inflight", 0.9),
        "placement_none_to_failed_host_after_2s": (
            None if placement is None else placement["sent_to_failed_host_after_2s"] == 0),
    }

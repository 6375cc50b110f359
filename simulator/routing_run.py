"""The routing benchmark: one seeded workload, routed by each policy in turn against a running Proxy.

Per policy, in one event loop and in real time (the Proxy's clock is real):

1. A fresh fleet of the workload (``simulator.workload``) starts reporting
   to the Proxy through the ordinary ``FleetDriver`` (ids
   ``<prefix>-<policy>-NNNNN``, so no state of one policy's fleet, a fence
   say, carries over to the next); its engines serve only routed requests.
2. Once the Proxy has two reports of every host, the arrival sequence is
   replayed: each request is routed by the policy (the Proxy's placement or
   the client's own choice), handed to that host's simulated vLLM server,
   which queues and serves it, and its time to first token measured from
   its arrival (so the placement question's round trip counts). With a
   prompt workload (``simulator.prompts``) the engines keep prefix caches
   and, but in ``placement-learned``'s fleet, publish them to the Proxy
   from then on (``simulator.prefix_feed``, with the fleet's token).
3. Midway, one engine turns slow and another dies, as the workload says;
   the engines advance every ``TICK_S`` so queued requests start as soon
   as a slot frees.
4. When every request has its first token or its outcome, the fleet
   unregisters; the next policy starts.

The prompts are written once, before the first policy, in the form the
placement policies send (``--prompt-form``, ``simulator.prompt_forms``);
with ``text`` and ``chat`` the Proxy tokenizes every prompt, so the
placement round trip measured includes the tokenization.

Every policy tries a refused request again elsewhere (up to
``routing.MAX_ATTEMPTS`` instances: nothing was sent, so nothing is
repeated); a request the engine dropped after taking it is failed. The
placement policies report every outcome to ``POST /v1/placement/feedback``
(``ok`` at the first token, ``refused``, ``error`` when the engine died
holding the request, ``timeout`` when no first token came in time); the
client-side ones leave a failed instance out for ``routing.FAIL_TIMEOUT_S``.
"""

from __future__ import annotations

import asyncio
import functools
import time
from dataclasses import asdict, dataclass, replace
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import orjson

from simulator import routing
from simulator.config import RunConfig
from simulator.driver import FleetDriver
from simulator.gpus import GpuFault
from simulator.model import FleetProfile
from simulator.prefix_feed import PrefixFeed
from simulator.prompt_forms import KEYS, TEXT_FORMS, load_tokenizer, turns_of
from simulator.protocol import USER_AGENT
from simulator.router import LIST_PATH, Router
from simulator.workload import MODEL, PolicyScore, RoutedRequest, RoutingWorkload

TICK_S = 0.05
WARM_UP_TIMEOUT_S = 30.0
# The fleet's churn off: only the workload's own faults, the same for every policy.
ROUTING_PROFILE = FleetProfile(
    unhealthy_gpu_share=0.0, gpu_fault_mean_s=1e12, stale_per_hour=0.0, restarts_per_hour=0.0,
    capabilities_share=0.0, engine_fault_share=0.0, engine_bursts_per_hour=0.0, gpu_counts_in_turn=True)


# What a request the router did not send counts as, by its router's action (``PolicyScore``'s fields).
UNSENT = {routing.SHED: "shed", routing.ROUTE_BUSY: "route_busy", routing.UNAVAILABLE: "unavailable",
          routing.ROUTE_ERROR: "route_errors"}


class WarmUpError(RuntimeError):
    """The Proxy never listed a policy's fleet with its reports: nothing to route over."""


def route_listener_url(proxy_url):
    """Where ``up`` puts a Proxy's route listener: its web port + 1 (docs/placement.md, "The route listener")."""
    parts = urlsplit(proxy_url.rstrip("/"))
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return urlunsplit(parts._replace(netloc=f"{parts.hostname}:{port + 1}"))


@dataclass(frozen=True)
class RoutingConfig:
    proxy_url: str = "http://127.0.0.1:8000"  # the fleet's reports and the list reads
    route_url: str | None = None  # placement and feedback: the route listener (None: route_listener_url)
    token: str | None = None  # scope instance: the fleet's reports
    route_token: str | None = None  # scope route (or read): placement, feedback, the list
    workload: RoutingWorkload = RoutingWorkload()
    policies: tuple = routing.MIXED_POLICIES  # the mixed workload's; routing.policies_for(kind)
    interval_ms: int = 1000
    id_prefix: str = "route"
    timeout_s: float = 10.0
    placement_count: int = 3
    prompt_form: str = KEYS  # how the placement policies send a prompt (simulator.prompt_forms)
    tokenizer: str | None = None  # the text forms' tokenizer directory: the Proxy's for MODEL

    def turns(self):
        """The writer of the workload's prompts in ``prompt_form`` (the tokenizer loaded for the text forms)."""
        tokenizer = load_tokenizer(self.tokenizer) if self.prompt_form in TEXT_FORMS else None
        prompts = self.workload.prompts
        return turns_of(self.prompt_form, MODEL, prompts.block_tokens if prompts else 16, tokenizer)

    @property
    def placement_url(self):
        return (self.route_url or route_listener_url(self.proxy_url)).rstrip("/")

    def fleet_config(self, policy):
        workload = self.workload
        return RunConfig(
            proxy_url=self.proxy_url, instances=workload.hosts, interval_ms=self.interval_ms, token=self.token,
            seed=workload.seed, id_prefix=f"{self.id_prefix}-{policy}",
            profile=replace(ROUTING_PROFILE, gpu_counts=workload.gpu_counts), timeout_s=self.timeout_s, ramp_s=0.0)


def service_rate(engine, workload):
    """Requests a second a host's server finishes when full of requests of the workload's mean lengths.

    With prompts (a prefix cache, prefills one after another) also at most
    what its prefills take when nothing is cached: the rate is the same for
    every policy, and a cache only makes room.
    """
    total = 0.0
    mean_tokens = workload.prompt_mean + workload.output_mean / 2
    for rank in engine.ranks:
        seqs = min(rank.max_num_seqs, max(1.0, rank.capacity_tokens / mean_tokens))  # what the KV cache holds
        service_s = workload.output_mean * engine.itl_s * 1.6 + workload.prompt_mean / rank.prefill_tokens_per_s
        rate = seqs / service_s
        if workload.prompts is not None:
            rate = min(rate, rank.prefill_tokens_per_s / workload.prompt_mean)
        total += rate
    return total


def prepare_fleet(hosts, workload, policy=routing.PLACEMENT):
    """Give the hosts the workload's model and roles (and, with prompts, their prefix caches: published
    unless ``policy``'s fleet publishes none); ``{host index: role}``."""
    roles = workload.roles()
    for host in hosts:
        host.engine.model = MODEL
        host.engine.routed_only = True
        if workload.prompts is not None:
            for rank in host.engine.ranks:
                rank.size_for(workload.prompt_mean, workload.output_mean)
            host.engine.keep_prefix_cache(workload.cache_tokens_per_gpu, workload.prompts.block_tokens,
                                          routing.publishes(policy))
        if roles.get(host.index) == "unhealthy":
            gpu = host.gpus[0]
            gpu.fault, gpu.ecc_errors = GpuFault.ECC_UNCORRECTED, 2  # health error (SPEC 2.2)
            host.engine.slow_down(workload.unhealthy_slowdown)
    return roles


def wall_ms():
    return time.time() * 1000.0


class PolicyRun:
    """One policy over the workload: its fleet, its router, its score."""

    def __init__(self, config: RoutingConfig, policy, session, feed_session=None, stream_of=None):
        """``stream_of(rate_per_s)``: the arrivals (the workload's, written once for every policy)."""
        self.config = config
        self.workload = config.workload
        self.stream_of = stream_of or self.workload.arrivals
        self.policy = policy
        self.session = session
        fleet_config = config.fleet_config(policy)
        self.driver = FleetDriver(fleet_config, fleet_config.indices())
        self.hosts = {state.host.instance_id: state.host for state in self.driver.states}
        self.roles = prepare_fleet(self.hosts.values(), self.workload, policy)
        self.router = Router(policy, session, config.proxy_url.rstrip("/"), frozenset(self.hosts), config,
                             route_url=config.placement_url)
        self.feed = (PrefixFeed(feed_session, config.proxy_url.rstrip("/"), self.hosts, epoch=int(wall_ms()))
                     if self.workload.prompts is not None and routing.publishes(policy) else None)
        self.score = PolicyScore(duration_s=self.workload.duration_s)
        self.failed_since = {}  # instance id -> when it failed (s from the start of the traffic)
        self.sent_to = {}  # instance id -> attempts sent there
        self.warm_up_s = None
        self._endings = set()  # requests past their first token, generating: watched for the in-flight counts

    async def run(self):
        loop = asyncio.get_running_loop()
        fleet = loop.create_task(self.driver.run())
        ticker = loop.create_task(self._tick())
        refresher = feeding = None
        try:
            started = loop.time()
            await self._warm_up(fleet)
            self.warm_up_s = loop.time() - started
            if self.feed is not None:
                feeding = loop.create_task(self.feed.run())
            if self.router.client is not None:
                await self.router.read_list()
                refresher = loop.create_task(self.router.refresh())
            await self._traffic(loop)
            await self.router.drain()
        finally:
            for task in (ticker, refresher, feeding, *self._endings):
                if task is not None:
                    task.cancel()
            self.driver.request_stop()
            fleet_stats = await fleet
        row = self.score.as_row()
        row["fleet_errors"] = dict(fleet_stats.errors())  # the fleet's own reports that failed, by kind
        if self.feed is not None:
            row["prefix_feed"] = self.feed.stats()
        row["sent_by_instance"] = dict(sorted(self.sent_to.items()))
        if self.router.client is None:
            times = sorted(self.router.placement_ms)
            row["placement_p50_ms"] = round(times[len(times) // 2], 2) if times else None
            row["feedback_failures"] = self.router.feedback_failures
            row["feedback_route_busy"] = self.router.feedback_route_busy
            row["prefix_source"] = dict(sorted(self.router.prefix_sources.items()))
            if self.config.prompt_form in TEXT_FORMS:
                row["prompt_error"] = dict(sorted(self.router.prompt_errors.items()))
        return row

    async def _tick(self):
        engines = [host.engine for host in self.hosts.values()]
        while True:
            now = wall_ms()
            for engine in engines:
                engine.advance(now, 0.0)
            await asyncio.sleep(TICK_S)

    async def _warm_up(self, fleet):
        """Until the Proxy holds two reports of every host (engines' windows filled once), or give up."""
        deadline = time.monotonic() + WARM_UP_TIMEOUT_S
        while time.monotonic() < deadline and not fleet.done():
            try:
                async with self.session.get(self.config.proxy_url.rstrip("/") + LIST_PATH) as response:
                    rows = orjson.loads(await response.read()) if response.status == 200 else []
            except (aiohttp.ClientError, TimeoutError, orjson.JSONDecodeError):
                rows = []
            reported = {row.get("instance_id") for row in rows if isinstance(row, dict)
                        and ((row.get("resource") or {}).get("report_seq") or 0) >= 2}
            if reported >= set(self.hosts):
                return
            await asyncio.sleep(0.25)
        errors = dict(self.driver.stats.errors())
        raise WarmUpError(f"the Proxy at {self.config.proxy_url} did not list the {self.policy} fleet's reports "
                          f"within {WARM_UP_TIMEOUT_S:.0f} s (the fleet's failed requests: {errors or 'none'}; "
                          "--token needs scope instance, --route-token scope route or read)")

    async def _traffic(self, loop):
        workload = self.workload
        rates = {host.index: service_rate(host.engine, workload) for host in self.hosts.values()}
        self.rate_per_s = workload.rate_per_s(rates)
        by_index = {host.index: instance_id for instance_id, host in self.hosts.items()}
        for index, role in self.roles.items():
            if role == "unhealthy":  # ill since before the traffic began
                self.failed_since[by_index[index]] = -self.warm_up_s
        arrivals = self.stream_of(self.rate_per_s)  # prompts' keys computed before the clock starts
        t0 = self.t0 = loop.time()
        self.t0_ms = wall_ms()
        slow = [by_index[i] for i, role in self.roles.items() if role == "slow"]
        dead = [by_index[i] for i, role in self.roles.items() if role == "dead"]
        for instance_id in slow:
            loop.call_at(t0 + workload.slow_at, self.hosts[instance_id].engine.slow_down, workload.slow_factor)
        for instance_id in dead:
            loop.call_at(t0 + workload.dead_at, self._kill, instance_id)
        requests = []
        for at_s, prompt, output in arrivals:
            delay = t0 + at_s - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            requests.append(loop.create_task(self._request(at_s, prompt, output)))
        await asyncio.gather(*requests)

    def _kill(self, instance_id):
        self.hosts[instance_id].engine.kill()
        self.failed_since[instance_id] = asyncio.get_running_loop().time() - self.t0

    async def _request(self, at_s, prompt, output):
        """One request: routed (again, elsewhere, when refused), sent, its first token awaited, its end."""
        loop, score = asyncio.get_running_loop(), self.score
        arrived_ms = wall_ms() - (loop.time() - self.t0 - at_s) * 1000.0  # the arrival as scheduled
        score.requests += 1
        refused, asked = [], RoutedRequest(prompt, output)
        while len(refused) < routing.MAX_ATTEMPTS:
            action, instance_id = await self.router.route(asked, loop.time() - self.t0, refused)
            counted = UNSENT.get(action)
            if counted is not None:  # not sent anywhere: counted by why
                setattr(score, counted, getattr(score, counted) + 1)
                return
            if await self._send(instance_id, prompt, output, arrived_ms):
                return
            refused.append(instance_id)  # connection refused: nothing was sent, so it may go elsewhere
        score.errors += 1

    async def _send(self, instance_id, prompt, output, arrived_ms):
        """One attempt at ``instance_id``: False when it refused the connection (the caller tries again)."""
        loop, score = asyncio.get_running_loop(), self.score
        now_s = loop.time() - self.t0
        score.sent(now_s, self.failed_since.get(instance_id))
        self.sent_to[instance_id] = self.sent_to.get(instance_id, 0) + 1
        first, done = loop.create_future(), loop.create_future()

        def changed(request):
            if request.failed:
                for future in (first, done):
                    if not future.done():
                        future.set_result(None)
                return
            if request.first_token_ms is not None and not first.done():
                first.set_result(request.first_token_ms)
            if request.done_ms is not None and not done.done():
                done.set_result(request.done_ms)

        request = RoutedRequest(prompt, output, changed)
        self.router.started(instance_id)
        generating = False
        try:
            if not self.hosts[instance_id].engine.submit(request, wall_ms()):
                self.router.feedback(instance_id, "refused", None, now_s)
                return False
            left_s = self.workload.ttft_timeout_s - (wall_ms() - arrived_ms) / 1000.0
            try:
                first_token_ms = await asyncio.wait_for(asyncio.shield(first), max(0.0, left_s))
            except TimeoutError:
                request.abandoned = True
                score.timeouts += 1
                self.router.feedback(instance_id, "timeout", None, loop.time() - self.t0)
                return True
            if first_token_ms is None:
                score.errors += 1  # the server died holding it: the stream broke after it was sent
                self.router.feedback(instance_id, "error", 502, loop.time() - self.t0)
                return True
            await asyncio.sleep(max(0.0, (first_token_ms - wall_ms()) / 1000.0))
            score.served((first_token_ms - arrived_ms) / 1000.0, request)
            self.router.feedback(instance_id, "ok", 200, loop.time() - self.t0)
            generating = True
            ending = loop.create_task(self._ending(done, instance_id, output))
            self._endings.add(ending)
            ending.add_done_callback(self._endings.discard)
            return True
        finally:
            if not generating:
                self.router.finished(instance_id)

    async def _ending(self, done, instance_id, output):
        """A request generating after its first token: in flight (to its client) until its last one."""
        try:
            done_ms = await done
            if done_ms is not None:
                self.score.completed(output, (done_ms - self.t0_ms) / 1000.0)
        finally:
            self.router.finished(instance_id)


async def run_benchmark(config: RoutingConfig, on_policy=None):
    """Every policy of ``config`` in turn; ``{"routing": {policy: row}, "workload": ...}``."""
    headers = {"Content-Type": "application/json", "User-Agent": f"{USER_AGENT}-router"}
    if config.route_token:
        headers["Authorization"] = f"Bearer {config.route_token}"
    timeout = aiohttp.ClientTimeout(total=config.timeout_s)
    results, details = {}, {}
    turns = config.turns()
    stream_of = functools.cache(lambda rate_per_s: config.workload.arrivals(rate_per_s, turns=turns))
    feed_headers = {"Content-Type": "application/json", "User-Agent": f"{USER_AGENT}-kv-events"}
    if config.token:
        feed_headers["Authorization"] = f"Bearer {config.token}"  # scope instance, as the agents report
    async with aiohttp.ClientSession(headers=headers, timeout=timeout,
                                     connector=aiohttp.TCPConnector(limit=64)) as session, \
            aiohttp.ClientSession(headers=feed_headers, timeout=timeout,
                                  connector=aiohttp.TCPConnector(limit=16)) as feed_session:
        for policy in config.policies:
            run = PolicyRun(config, policy, session, feed_session, stream_of)
            results[policy] = await run.run()
            details = {"rate_per_s": round(run.rate_per_s, 3), "roles": {
                f"{config.id_prefix}-<policy>-{index:05d}": role for index, role in sorted(run.roles.items())},
                "gpu_counts": [config.workload.gpu_count(i) for i in range(config.workload.hosts)]}
            if on_policy is not None:
                on_policy(policy, results[policy])
    workload = config.workload
    prompts = workload.prompts
    return {"routing": results, "proxy_url": config.proxy_url, "route_url": config.placement_url, "workload": {
        "kind": workload.kind, "prompts": None if prompts is None else asdict(prompts),
        "prompt_form": None if prompts is None else config.prompt_form,
        "tokenizer": config.tokenizer if prompts is not None and config.prompt_form in TEXT_FORMS else None,
        "cache_tokens_per_gpu": None if prompts is None else workload.cache_tokens_per_gpu,
        "seed": workload.seed, "hosts": workload.hosts, "duration_s": workload.duration_s, "load": workload.load,
        "prompt_mean": workload.prompt_mean, "output_mean": workload.output_mean,
        "slow_at_s": workload.slow_at, "slow_factor": workload.slow_factor, "dead_at_s": workload.dead_at,
        "unhealthy_slowdown": workload.unhealthy_slowdown, "interval_ms": config.interval_ms,
        "list_refresh_s": routing.LIST_REFRESH_S, **details}}

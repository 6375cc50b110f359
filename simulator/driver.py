"""One asyncio event loop driving a share of the fleet through the Proxy's HTTP API.

Each simulated instance behaves like the agent's reporter (SPEC 2.3): it
registers, reports a snapshot every interval on a fixed-rate schedule,
heartbeats every ``heartbeat_interval_s`` of the register answer, registers
again at once on ``unknown_instance``, backs off with jitter on failures and
unregisters on a clean stop. One request at a time per instance.

Scheduling (``simulator.schedule``): slots spread evenly over the interval,
a ramped start, late rounds skipping slots. Each pending round is a timer on
the event loop (``loop.call_at``), not a sleeping task; how late each timer
fired is recorded, so a client short of CPU shows it. All requests share one
aiohttp session with a bounded pool of keep-alive connections; when every
connection is busy a report slot is shed rather than queued behind them.
"""

from __future__ import annotations

import asyncio
import gc
import math
import random
import time
from dataclasses import dataclass

import aiohttp
import orjson
import yarl

from agent.reporter import Backoff
from simulator import protocol
from simulator import stats as outcomes
from simulator.config import RunConfig
from simulator.hints import AUTH_HINTS, refused_from_the_start
from simulator.model import Round, build_fleet
from simulator.protocol import Answer, classify_answer
from simulator.schedule import DUE_SLACK_S, first_slot, first_slot_ms
from simulator.stats import FleetStats

DEFAULT_HEARTBEAT_S = 10.0


@dataclass(slots=True)
class InstanceState:
    """The driver's side of one simulated instance: registration, schedule, backoff."""

    host: object
    backoff: Backoff
    registered: bool = False
    heartbeat_interval_s: float = DEFAULT_HEARTBEAT_S
    next_report_at: float | None = None
    next_heartbeat_at: float | None = None
    retry_at: float | None = None
    rounds_done: int = 0
    handle: object = None
    finished: bool = False


class FleetDriver:
    """Drives the instances ``indices`` of a run in the running event loop.

    ``await run()`` returns when every instance is done (rounds or duration)
    or after ``request_stop()``; a second ``request_stop()`` abandons what is
    in flight, including the unregistering.
    """

    def __init__(self, config: RunConfig, indices, *, on_progress=None, progress_every_s=0.5,
                 wall_ms=None):
        self.config = config
        self.interval_s = config.interval_ms / 1000.0
        rand = random.Random(f"fleetwatch-simulator-driver:{config.seed}").random
        hosts = build_fleet(indices, config.instances, config.seed, config.profile, config.interval_ms,
                            config.id_prefix)
        self.states = [InstanceState(host, Backoff(rand=rand)) for host in hosts]
        self.stats = FleetStats()
        self.stats.instances = len(self.states)
        self._on_progress = on_progress
        self._progress_every_s = progress_every_s
        self._wall_ms = wall_ms or (lambda: int(time.time() * 1000))
        base = config.proxy_url.rstrip("/")
        # Parsed once: parsing each request's URL is a measurable part of its cost.
        self._urls = {path: yarl.URL(base + path) for path in protocol.PATHS}
        self._stop_requests, self._tasks, self._active = 0, set(), len(self.states)
        # Set as the run goes: its loop, HTTP session, start and end; when it was stopped, its unregistering.
        self._loop = self._session = self._t0 = self._end_at = self._done = None
        self._stopped_at = self._unregistering = None

    # --- the run ----------------------------------------------------------------

    async def run(self, start_wall_s=None) -> FleetStats:
        """Drive the fleet; ``start_wall_s`` aligns the first slot across processes (default: now)."""
        loop = self._loop = asyncio.get_running_loop()
        self._done = asyncio.Event()
        headers = {"Content-Type": "application/json", "User-Agent": protocol.USER_AGENT}
        if self.config.token:
            headers["Authorization"] = f"Bearer {self.config.token}"
        connector = aiohttp.TCPConnector(limit=self.config.connections, ttl_dns_cache=300)
        # The timeout is the Proxy's: connecting and awaiting its answer, not
        # waiting for a free connection of our own pool (registering and
        # unregistering a large fleet queue there).
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.config.timeout_s,
                                        sock_read=self.config.timeout_s)
        # The fleet lives as long as the run: out of the collector's way, it
        # stops costing a full collection a tenth of the client's time.
        gc.collect()
        gc.freeze()
        async with aiohttp.ClientSession(connector=connector, timeout=timeout, headers=headers,
                                         cookie_jar=aiohttp.DummyCookieJar()) as session:
            self._session = session
            delay = 0.0 if start_wall_s is None else max(0.0, start_wall_s - time.time())
            self._t0 = loop.time() + delay
            if self.config.duration_s is not None:
                self._end_at = self._t0 + self.config.duration_s
            ramp = self.config.ramp_rounds
            for state in self.states:
                state.next_report_at = self._t0 + first_slot_ms(
                    state.host.index, self.config.instances, self.config.interval_ms, ramp) / 1000.0
                self._schedule(state, state.next_report_at)
            if not self.states:
                self._done.set()
            progress = loop.create_task(self._report_progress())
            try:
                await self._done.wait()
                self.stats.elapsed_s = self._elapsed(final=True)
                if self.config.unregister and self._stop_requests < 2:
                    self._unregistering = loop.create_task(self._unregister_all())
                    try:
                        await self._unregistering
                    except asyncio.CancelledError:
                        if self._stop_requests < 2:
                            raise
            finally:
                progress.cancel()
                gc.unfreeze()
                self.stats.finished = True
                self.stats.in_flight = 0
                if self._on_progress is not None:
                    self._on_progress(self.stats)
        return self.stats

    def _planned_s(self):
        """How long the run reports, when it has an end (duration or rounds); None otherwise."""
        limits = []
        if self.config.duration_s is not None:
            limits.append(self.config.duration_s)
        if self.config.rounds is not None:  # the last hosts to start report their last slot then
            limits.append((self.config.rounds + self.config.ramp_rounds - 1) * self.interval_s)
        return min(limits) if limits else None

    def _elapsed(self, final=False):
        """The reporting window so far: from the first slot to now, the stop, or the planned end.

        Rates are counted over this window, so a run of D seconds that sent
        N reports a second shows N/s, not a little less for the last answers'
        trip home.
        """
        planned = self._planned_s()
        if final and self._stopped_at is None and planned is not None:
            return planned
        end = self._loop.time() if self._stopped_at is None else self._stopped_at
        elapsed = max(0.0, end - self._t0)
        return elapsed if planned is None else min(elapsed, planned)

    def request_stop(self):
        """First call: stop scheduling, finish what is in flight, unregister. Second: abandon all that."""
        self._stop_requests += 1
        if self._loop is None:
            return
        if self._stop_requests == 1:
            self._stopped_at = self._loop.time()
            for state in self.states:
                if state.handle is not None:
                    state.handle.cancel()
                    state.handle = None
                    self._finish(state)
        else:
            for task in list(self._tasks):
                task.cancel()
            if self._unregistering is not None:
                self._unregistering.cancel()

    @property
    def stopping(self):
        return self._stop_requests > 0

    async def _report_progress(self):
        while True:
            await asyncio.sleep(self._progress_every_s)
            self.stats.elapsed_s = self._elapsed()
            if self._on_progress is not None:
                self._on_progress(self.stats)

    # --- scheduling -------------------------------------------------------------

    def _schedule(self, state, at):
        state.handle = self._loop.call_at(at, self._fire, state, at)

    def _fire(self, state, at):
        state.handle = None
        now = self._loop.time()
        if abs(at - state.next_report_at) < 1e-9:
            self.stats.lag.add(max(0.0, now - at))
            if state.registered and not state.host.silent and self.stats.in_flight >= self.config.connections:
                # Every connection is busy: this slot's report could only wait
                # in the client. Shed it, as an agent skips a slot while its
                # previous report is still out, so a saturated client (or
                # Proxy) shows as shed slots and not as latency it made up.
                # Registering is never shed: an agent's start does not wait.
                state.rounds_done += 1
                state.next_report_at += self.interval_s
                self.stats.note("shed_slots")
                self._skip_slots(state, now, "skipped_slots")
                self._schedule_next(state)
                return
        self.stats.in_flight += 1
        task = self._loop.create_task(self._round(state))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _finish(self, state):
        if not state.finished:
            state.finished = True
            self._active -= 1
            if self._active == 0:
                self._done.set()

    def _more_slots(self, state):
        rounds, end_at = self.config.rounds, self._end_at
        if rounds is not None and state.rounds_done >= rounds:
            return False
        return end_at is None or state.next_report_at < end_at

    def _skip_slots(self, state, not_before, event):
        """Move past the slots before ``not_before``, counting those inside the run's rounds and duration."""
        first_skipped = state.next_report_at
        state.next_report_at, skipped = first_slot(first_skipped, self.interval_s, not_before)
        if self.config.rounds is not None:
            skipped = min(skipped, self.config.rounds - state.rounds_done)
        if self._end_at is not None:
            skipped = min(skipped, math.ceil((self._end_at - first_skipped) / self.interval_s))
        skipped = max(0, skipped)
        state.rounds_done += skipped
        self.stats.note(event, skipped)

    def _schedule_next(self, state):
        if not self.stopping:
            if state.retry_at is not None:
                self._skip_slots(state, state.retry_at, "backoff_slots")
            # A round that outlasted its next slots (a slow answer) skips them
            # here, so that a timer's lag is the event loop's own.
            self._skip_slots(state, self._loop.time(), "skipped_slots")
        if self.stopping or not self._more_slots(state):
            self._finish(state)
            return
        at = state.next_report_at
        if not state.registered:
            if state.retry_at is not None:
                at = min(at, state.retry_at)
        elif state.next_heartbeat_at is not None and not state.host.silent:
            at = min(at, max(state.next_heartbeat_at, state.retry_at or 0.0))
        self._schedule(state, at)

    # --- one round of one instance -------------------------------------------------

    async def _round(self, state):
        """Whatever is due for one instance now: (re)register, its report slot, its heartbeat."""
        try:
            slot_due = self._loop.time() + DUE_SLACK_S >= state.next_report_at
            if slot_due:
                # The slot is taken whatever happens next; a round that ran
                # late skips the slots it overran.
                state.rounds_done += 1
                self.stats.note("report_slots")
                state.next_report_at += self.interval_s
                self._skip_slots(state, self._loop.time(), "skipped_slots")
            if not state.registered and not await self._register(state):
                return
            if slot_due:
                await self._report(state)
            heartbeat_at = state.next_heartbeat_at
            if (state.registered and not state.host.silent and heartbeat_at is not None
                    and self._loop.time() + DUE_SLACK_S >= heartbeat_at and not self.stopping):
                await self._heartbeat(state)
        finally:
            self.stats.in_flight -= 1
            self._schedule_next(state)

    async def _report(self, state):
        """The host's report slot: a snapshot, silence (a stale spell) or a restart and a snapshot."""
        host = state.host
        was_silent, spells = host.silent, host.stale_spells
        kind = host.next_round()
        self.stats.silent += int(host.silent) - int(was_silent)
        self.stats.note("stale_spells", host.stale_spells - spells)
        if kind is Round.SILENT:
            self.stats.note("silent_slots")
            return
        if kind is Round.RESTART:
            # The agent started again: it registers first, as on any start.
            self.stats.note("restarts")
            self._set_registered(state, False)
            if not await self._register(state):
                return
        await self._send_report(state, host.report_body(self._wall_ms()))

    async def _send_report(self, state, body):
        answer = await self._post("snapshot", protocol.SNAPSHOT_PATH, body)
        if answer.outcome == outcomes.UNKNOWN_INSTANCE and await self._reregister(state):
            answer = await self._post("snapshot", protocol.SNAPSHOT_PATH, body)  # the same report: nothing lost
        if answer.ok:
            self._succeeded(state)
            if answer.data.get("stale"):
                self.stats.note("stale_answers")
        else:
            self._back_off(state)

    async def _heartbeat(self, state):
        host = state.host
        answer = await self._post("heartbeat", protocol.HEARTBEAT_PATH, host.heartbeat_body())
        if answer.outcome == outcomes.UNKNOWN_INSTANCE:
            # Registering counts as contact and sets the next heartbeat; it backs off itself on failure.
            await self._reregister(state)
            return
        if answer.outcome == outcomes.CAPABILITY_RESYNC:
            self.stats.note("capability_resyncs")
            body = host.heartbeat_body(with_capabilities=True)
            answer = await self._post("heartbeat", protocol.HEARTBEAT_PATH, body)
        state.next_heartbeat_at = self._loop.time() + state.heartbeat_interval_s
        if answer.ok:
            self._succeeded(state)
        else:
            self._back_off(state)

    async def _reregister(self, state):
        """The Proxy forgot the instance (SPEC 2.3): register again at once."""
        self.stats.note("reregistrations")
        self._set_registered(state, False)
        return await self._register(state)

    async def _register(self, state):
        answer = await self._post("register", protocol.REGISTER_PATH, state.host.register_body())
        if not answer.ok:
            self._back_off(state)
            return False
        interval = answer.data.get("heartbeat_interval_s")
        if isinstance(interval, (int, float)) and not isinstance(interval, bool) and interval > 0:
            state.heartbeat_interval_s = float(interval)
        state.next_heartbeat_at = self._loop.time() + state.heartbeat_interval_s
        self._succeeded(state)
        self._set_registered(state, True)
        return True

    def _set_registered(self, state, registered):
        if state.registered != registered:
            state.registered = registered
            self.stats.registered += 1 if registered else -1

    def _succeeded(self, state):
        state.retry_at = None
        state.backoff.reset()

    def _back_off(self, state):
        state.retry_at = self._loop.time() + state.backoff.next_delay()
        self.stats.note("backoffs")

    async def _unregister_all(self):
        registered = [state for state in self.states if state.registered]

        async def unregister(state):
            answer = await self._post("unregister", protocol.UNREGISTER_PATH, state.host.unregister_body())
            if answer.ok:
                self._set_registered(state, False)

        await asyncio.gather(*(unregister(state) for state in registered))

    # --- HTTP -------------------------------------------------------------------

    async def _post(self, request, path, body) -> Answer:
        data = orjson.dumps(body)
        started = time.perf_counter()
        try:
            async with self._session.post(self._urls[path], data=data) as response:
                raw = await response.read()
                answer = classify_answer(request, response.status, raw)
        except TimeoutError:
            answer = Answer(outcomes.TIMEOUT)
        except aiohttp.ClientConnectionError:
            answer = Answer(outcomes.CONNECTION_ERROR)
        except aiohttp.ClientError:
            answer = Answer(outcomes.CLIENT_ERROR)
        self.stats.record(request, answer.outcome, time.perf_counter() - started)
        if answer.outcome in AUTH_HINTS and not self.stopping and refused_from_the_start(self.stats):
            # Retrying would never end without --duration: stop and say why (the command's error does).
            self.stats.note("gave_up_refused")
            self.request_stop()
        return answer

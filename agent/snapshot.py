"""Assembling ``resource_snapshot_v1`` (SPEC 2.2) and keeping the latest one.

One background thread samples on a fixed period and swaps the result into a
``SnapshotStore``; HTTP requests and the reporter only read the store, so no
request ever triggers sampling and a slow client cannot slow the sampler.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from typing import Callable

from agent import AGENT_VERSION
from agent.capacity import AdmissionThresholds, capacity_hint
from agent.sampler import monotonic_ms, wall_ms

log = logging.getLogger(__name__)

SCHEMA_VERSION = "resource_snapshot_v1"


@dataclass(eq=False)
class SnapshotBuilder:
    """Takes one full snapshot from the host sampler, the GPU monitor and the engine scrapers.

    ``instance_id`` may change at run time: the Proxy's register answer is
    authoritative about the id this agent reports under. ``engines`` (an
    ``EngineScrapers``) is None when no engine URL is configured, and the
    snapshot then has no ``engines`` key (SPEC 13).
    """

    host_sampler: object
    gpu_monitor: object
    instance_id: str
    hostname: str
    thresholds: AdmissionThresholds = AdmissionThresholds()
    clock_wall_ms: Callable[[], int] = wall_ms
    engines: object = None
    # True when the engines are scraped at their own rate (``SamplingLoop``'s engine thread asks for them).
    engines_on_their_own: bool = False

    def __post_init__(self):
        self._host = None  # (devices, gpu status) of the latest host sample, for snapshots between them

    def take(self) -> dict:
        if self.engines is not None and not self.engines_on_their_own:
            # Asked first, collected last: a quick engine answers while the
            # host and GPUs are read, a slow one is read on a later tick.
            self.engines.request()
        devices = self.host_sampler.sample()
        gpus = self.gpu_monitor.sample()
        devices["gpu"] = gpus
        status = self.gpu_monitor.status
        if status == "ok" and not gpus:
            status = "no_gpu"
        self._host = (devices, status)
        return self._assemble(devices, status)

    def retake_engines(self):
        """A snapshot with the engines' newest figures and the latest host sample, or None before that sample."""
        if self._host is None:
            return None
        return self._assemble(*self._host)

    def _assemble(self, devices, status) -> dict:
        gpus = devices["gpu"]
        engines = None if self.engines is None else self.engines.objects()
        snapshot = {
            "schema_version": SCHEMA_VERSION,
            "agent_version": AGENT_VERSION,
            "instance_id": self.instance_id,
            "timestamp_ms": self.clock_wall_ms(),
            "hostname": self.hostname,
            "devices": devices,
            # The serving engines' queues and KV caches are under "engines"
            # (SPEC 13); the original's runtime object stays, empty, for compat.
            "runtime": {},
            "gpu_status": status,
            "capacity_hint": capacity_hint(devices["memory"], devices["cpu"], gpus, self.thresholds, engines),
        }
        if engines is not None:
            snapshot["engines"] = engines
        return snapshot


class SnapshotStore:
    """The latest snapshot and its JSON body, replaced as one unit.

    The body is encoded when first asked for, not at each ``put``: with the
    engines refreshed every 250 ms (``--engine-interval-ms``) the store is
    replaced four times a second but read (by the reporter, or a GET) about
    once, and encoding a snapshot was most of a refresh (issue 32's agent cost).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._snapshot = None
        self._body = None

    def put(self, snapshot: dict):
        with self._lock:
            self._snapshot, self._body = snapshot, None

    def latest(self):
        """The latest snapshot dict (treat as read-only), or None before the first sample."""
        with self._lock:
            return self._snapshot

    def latest_body(self):
        """The latest snapshot as JSON bytes, or None before the first sample."""
        return self.latest_pair()[1]

    def latest_pair(self):
        """``(snapshot, body)`` of the same sample, or ``(None, None)``."""
        with self._lock:
            snapshot, body = self._snapshot, self._body
        if snapshot is not None and body is None:
            # Encoded outside the lock (a put never waits on it); kept unless a newer snapshot came meanwhile.
            body = json.dumps(snapshot, separators=(",", ":")).encode()
            with self._lock:
                if self._snapshot is snapshot:
                    self._body = body
        return snapshot, body


class SamplingLoop:
    """Calls ``builder.take()`` every ``interval_ms`` on its own thread.

    The schedule is fixed-rate: a slow sample shortens the next wait instead of
    drifting, and a sample that overran a whole period skips ahead rather than
    bursting to catch up.
    """

    def __init__(self, builder: SnapshotBuilder, store: SnapshotStore, interval_ms: int, clock_ms=monotonic_ms,
                 engine_interval_ms=None):
        self._builder = builder
        self._store = store
        self._interval_ms = interval_ms
        self._clock_ms = clock_ms
        self._stop = threading.Event()
        self._thread = None
        self._engine_thread = None
        self._failing_since = None
        self._put_lock = threading.Lock()  # the sampler and the engine thread both replace the snapshot
        # Engines scraped at their own rate (issue 32): the host is sampled every interval_ms, the engines every
        # engine_interval_ms, each scrape refreshing the snapshot's engines without sampling the host again.
        self._engine_interval_ms = engine_interval_ms if getattr(builder, "engines", None) is not None else None
        if self._engine_interval_ms is not None:
            builder.engines_on_their_own = True
            builder.engines.on_each_scrape(self.put_engines)

    def sample_once(self):
        """One sample into the store. Errors are logged, never raised: the loop must outlive them."""
        try:
            with self._put_lock:
                self._store.put(self._builder.take())
        except Exception:  # noqa: BLE001
            if self._failing_since is None:
                self._failing_since = self._clock_ms()
                log.exception("sampling failed; keeping the previous snapshot")
            return False
        if self._failing_since is not None:
            log.info("sampling recovered")
            self._failing_since = None
        return True

    def start(self, first_delay_ms=0):
        """Sample on a thread; ``first_delay_ms`` keeps the period after a sample taken by hand."""
        self._thread = threading.Thread(target=self._run, args=(first_delay_ms,), name="fleetwatch-sampler",
                                        daemon=True)
        self._thread.start()
        if self._engine_interval_ms is not None:
            self._engine_thread = threading.Thread(target=self._run_engines, name="fleetwatch-engine-ticks",
                                                   daemon=True)
            self._engine_thread.start()

    def stop(self, timeout_s=5.0):
        self._stop.set()
        for thread in (self._thread, self._engine_thread):
            if thread is not None:
                thread.join(timeout_s)

    def refresh_engines(self):
        """Ask every engine for a scrape; never raises, never waits for one.

        Each engine's thread puts a snapshot with its figures as its scrape
        finishes (``put_engines``), so this thread wakes once a tick rather
        than again for the answers (issue 32's agent cost). An engine still
        busy with an earlier scrape is put from here instead, so its figures
        turn to ``timeout`` at the first tick after its timeout has passed.
        """
        try:
            if not self._builder.engines.request():
                self.put_engines()
        except Exception:  # noqa: BLE001 - the engine thread must outlive any surprise
            log.exception("refreshing the engines' figures failed")

    def put_engines(self):
        """Put a snapshot with the engines' newest figures and the latest host sample; never raises."""
        try:
            with self._put_lock:
                snapshot = self._builder.retake_engines()
                if snapshot is not None:
                    self._store.put(snapshot)
        except Exception:  # noqa: BLE001 - an engine's thread must outlive any surprise
            log.exception("refreshing the engines' figures failed")

    def _run_engines(self):
        interval = self._engine_interval_ms
        next_at = self._clock_ms() + interval
        while not self._stop.wait(max(0, next_at - self._clock_ms()) / 1000.0):
            self.refresh_engines()
            next_at += interval
            now = self._clock_ms()
            if next_at <= now:
                next_at = now + interval - (now - next_at) % interval

    def _run(self, first_delay_ms):
        next_at = self._clock_ms() + first_delay_ms
        if first_delay_ms and self._stop.wait(first_delay_ms / 1000.0):
            return
        while not self._stop.is_set():
            self.sample_once()
            next_at += self._interval_ms
            now = self._clock_ms()
            if next_at <= now:
                next_at = now + self._interval_ms - (now - next_at) % self._interval_ms
            self._stop.wait((next_at - now) / 1000.0)

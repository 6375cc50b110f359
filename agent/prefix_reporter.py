"""Sending the engines' resident prompt blocks to the Proxy (SPEC 15.3): deltas, resets, backoff.

One thread, its own HTTP session (the snapshot reporter keeps its own), one
request at a time with the client's timeout: a slow Proxy delays these
bodies, never a snapshot report. Each engine rank (``engine`` in the body)
is sent

- its whole set (``reset``) when the thread starts, when the Proxy answers
  ``resync``, after a failed body (the Proxy may or may not have applied it),
  when the engine cleared its cache, and every ``full_every_s`` (300 s): a
  new ``epoch`` each time, ``seq`` from 0;
- otherwise its changes, at most every ``interval_s`` (250 ms) while there
  are any, ``seq`` + 1 per body.

A list holds at most ``MAX_ITEMS`` keys: a larger set goes as one reset body
followed by ordinary bodies. ``unknown_instance`` asks the snapshot reporter
to register again (``Reporter.forget_registration``) and retries with backoff.

``step()`` does what is due at the injected clock's "now" and returns how long
to wait, as ``Reporter.step`` does, so tests drive it without sleeping.
"""

from __future__ import annotations

import json
import logging
import threading
import time

from agent.reporter import OK, UNKNOWN_INSTANCE, Backoff, FailureLog
from agent.sampler import wall_ms

log = logging.getLogger(__name__)

PREFIX_BLOCKS_PATH = "/v1/instance/prefix_blocks"
MAX_ITEMS = 16_384


class _Stream:
    """One engine rank's epoch and sequence at the Proxy."""

    def __init__(self):
        self.epoch = None
        self.seq = 0
        self.full_at = None


class PrefixReporter:
    """``sources()`` lists ``(engine name, ResidentSet)`` pairs; ``instance_id()`` the id reported as now."""

    def __init__(self, client, sources, instance_id, block_tokens, on_unknown_instance=None, interval_s=0.25,
                 full_every_s=300.0, clock=time.monotonic, clock_wall_ms=wall_ms, backoff=None, failure_log=None):
        self._client = client
        self._sources = sources
        self._instance_id = instance_id
        self._block_tokens = block_tokens
        self._on_unknown_instance = on_unknown_instance
        self._interval_s = interval_s
        self._full_every_s = full_every_s
        self._clock = clock
        self._wall_ms = clock_wall_ms
        self._backoff = backoff or Backoff()
        self._failures = failure_log or FailureLog(logger=log, clock=clock)
        self._streams: dict[str, _Stream] = {}
        self._retry_at = None
        self.bodies_sent = 0
        self._stop = threading.Event()
        self._thread = None

    def step(self) -> float:
        now = self._clock()
        if self._retry_at is not None:
            if now < self._retry_at:
                return self._retry_at - now
            self._retry_at = None
        for engine, blocks in self._sources():
            stream = self._streams.setdefault(engine, _Stream())
            if stream.full_at is not None and now - stream.full_at >= self._full_every_s:
                blocks.request_reset()
            if not blocks.has_changes():
                continue
            reset, added, removed = blocks.drain()
            if not self._send(engine, stream, blocks, reset, added, removed):
                blocks.request_reset()  # the Proxy may hold part of it: start over, whole, after the backoff
                self._retry_at = self._clock() + self._backoff.next_delay()
                return max(0.0, self._retry_at - self._clock())
        return self._interval_s

    def _send(self, engine, stream, blocks, reset, added, removed) -> bool:
        if reset:
            stream.epoch = max((stream.epoch or 0) + 1, self._wall_ms())
            stream.seq = 0
            stream.full_at = self._clock()
        elif stream.epoch is None:  # pragma: no cover - a new set always starts with a reset
            return False
        count = max(1, -(-len(added) // MAX_ITEMS), -(-len(removed) // MAX_ITEMS))
        for n in range(count):
            body = {
                "instance_id": self._instance_id(),
                "engine": engine,
                "epoch": stream.epoch,
                "seq": stream.seq,
                "block_tokens": self._block_tokens,
                "reset": reset and n == 0,
                "added": added[n * MAX_ITEMS:(n + 1) * MAX_ITEMS],
                "removed": removed[n * MAX_ITEMS:(n + 1) * MAX_ITEMS],
            }
            answer = self._client.post(PREFIX_BLOCKS_PATH, json.dumps(body, separators=(",", ":")).encode())
            stream.seq += 1
            self.bodies_sent += 1
            if answer.kind == UNKNOWN_INSTANCE:
                if self._on_unknown_instance is not None:
                    self._on_unknown_instance()
                self._failures.failure(f"prefix blocks of {engine}: the Proxy does not know instance "
                                       f"{body['instance_id']}; registering again")
                return False
            if answer.kind != OK:
                self._failures.failure(f"prefix blocks of {engine} to {self._client.base_url} failed: "
                                       f"{answer.detail}")
                return False
            if answer.data.get("resync") is True:
                log.info("prefix blocks of %s: the Proxy asks for the whole set (resync)", engine)
                blocks.request_reset()
                break
        self._backoff.reset()
        self._failures.success()
        return True

    # --- thread -------------------------------------------------------------------

    def start(self):
        self._thread = threading.Thread(target=self._run, name="fleetwatch-prefix-reporter", daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                delay = self.step()
            except Exception:  # noqa: BLE001 - the thread must outlive any surprise
                log.exception("prefix reporter step failed")
                delay = self._backoff.next_delay()
            self._stop.wait(max(delay, 0.005))

    def stop(self, timeout_s=None):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s if timeout_s is not None else self._client.timeout_s + 1)

    def close(self):
        self._client.close()

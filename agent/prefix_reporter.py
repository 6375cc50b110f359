"""Sending the engines' resident prompt blocks to the Proxy (SPEC 15.3): deltas, resets, backoff.

One thread, its own kept-alive connection (a ``ProxyClient`` of its own; the
snapshot reporter holds another), one request at a time with a timeout: a slow
Proxy delays these bodies, never a snapshot report. Each engine rank (``engine`` in the body)
is sent

- its whole set (``reset``) when the thread starts, when the Proxy answers
  ``resync``, after a failed body (the Proxy may or may not have applied it),
  when the engine cleared its cache, and every ``full_every_s`` (300 s): a
  new ``epoch`` each time, ``seq`` from 0;
- otherwise its changes while there are any, ``seq`` + 1 per body: at most
  one body every ``interval_s`` (``--prefix-interval-ms``, default 1 s). The
  thread looks every ``LOOK_S`` (250 ms, SPEC 15.2's floor), so the first
  change after a quiet interval goes at once and only a steady stream of
  changes waits for the interval: a busy engine's changes cost one body a
  second instead of four (a body costs the agent about as much CPU with 250
  keys as with 1,000; issue 32's agent cost), and a lone completion still
  reaches the Proxy within 250 ms of its events being read. A reset is not
  held back by the interval.

A list holds at most ``MAX_ITEMS`` keys: a larger set goes as one reset body
followed by ordinary bodies. ``unknown_instance`` asks the snapshot reporter
to register again (``Reporter.forget_registration``) and retries with backoff.

``step()`` does what is due at the injected clock's "now" and returns how long
to wait, as ``Reporter.step`` does, so tests drive it without sleeping.
"""

from __future__ import annotations

import json
import logging
import time

from agent.proxy_client import OK, UNKNOWN_INSTANCE
from agent.reporter import FailureLog, SteppingThread
from agent.sampler import wall_ms

log = logging.getLogger(__name__)

PREFIX_BLOCKS_PATH = "/v1/instance/prefix_blocks"
MAX_ITEMS = 16_384
LOOK_S = 0.25  # SPEC 15.2: changes at most every 250 ms; the floor of interval_s too
DEFAULT_INTERVAL_S = 1.0


class _Stream:
    """One engine rank's epoch and sequence at the Proxy."""

    def __init__(self):
        self.epoch = None
        self.seq = 0
        self.full_at = None
        self.sent_at = None  # when its last body went (the clock's seconds)


class PrefixReporter(SteppingThread):
    """``sources()`` lists ``(engine name, ResidentSet)`` pairs; ``instance_id()`` the id reported as now."""

    thread_name = "fleetwatch-prefix-reporter"

    def __init__(self, client, sources, instance_id, block_tokens, on_unknown_instance=None,
                 interval_s=DEFAULT_INTERVAL_S, full_every_s=300.0, clock=time.monotonic, clock_wall_ms=wall_ms,
                 backoff=None, failure_log=None):
        self._start_stepping(client, backoff, clock)
        self._sources, self._instance_id, self._block_tokens = sources, instance_id, block_tokens
        self._on_unknown_instance = on_unknown_instance
        self._interval_s, self._full_every_s, self._wall_ms = max(LOOK_S, interval_s), full_every_s, clock_wall_ms
        self._failures = failure_log or FailureLog(logger=log, clock=clock)
        self._streams: dict[str, _Stream] = {}
        self.bodies_sent = 0

    def step(self) -> float:
        now = self._clock()
        wait = self._backing_off(now)
        if wait is not None:
            return wait
        wait = None
        for engine, blocks in self._sources():
            stream = self._streams.setdefault(engine, _Stream())
            if stream.full_at is not None and now - stream.full_at >= self._full_every_s:
                blocks.request_reset()
            held = self._held(stream, blocks, now)
            if not held and blocks.has_changes():
                reset, added, removed = blocks.drain()
                stream.sent_at = now
                if not self._send(engine, stream, blocks, reset, added, removed):
                    blocks.request_reset()  # the Proxy may hold part of it: start over, whole, after the backoff
                    return self._retry_later()
                held = self._held(stream, blocks, now)
            # A stream within its interval is looked at again when the interval ends, the others every LOOK_S.
            look = held or LOOK_S
            wait = look if wait is None else min(wait, look)
        return LOOK_S if wait is None else wait

    def _held(self, stream, blocks, now) -> float:
        """Seconds before the stream's next body of changes may go: 0 after its interval or when a reset is due."""
        if stream.sent_at is None or blocks.reset_pending:
            return 0.0
        return max(0.0, self._interval_s - (now - stream.sent_at))

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

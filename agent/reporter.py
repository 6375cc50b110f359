"""Reporting to the Proxy (SPEC 2.3): register, snapshots, heartbeats, unregister.

One thread does all this Proxy traffic, one request at a time over one
kept-alive connection (``agent/proxy_client.py``), each with a timeout, so a
slow or dead Proxy can delay reports but never pile up threads or sockets.
Failures back off exponentially with jitter while the sampler keeps sampling;
the log gets the first failure and then one summary a minute.

``Reporter.step()`` does whatever is due at the injected clock's "now" and
returns how long to wait, so tests drive it without sleeping.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time

from agent.proxy_client import OK, REJECTED, UNKNOWN_INSTANCE, Answer, ProxyClient
from agent.sampler import wall_ms

log = logging.getLogger(__name__)

REGISTER_PATH = "/v1/instance/register"
HEARTBEAT_PATH = "/v1/instance/heartbeat"
SNAPSHOT_PATH = "/v1/instance/resource_snapshot"
UNREGISTER_PATH = "/v1/instance/unregister"
# Used until the Proxy's register answer says otherwise (its own default cap).
DEFAULT_HEARTBEAT_S = 10.0
UNREGISTER_TIMEOUT_S = 2.0


class Backoff:
    """Exponential delays with "equal jitter": each delay lies in [base/2, base].

    The jitter keeps a fleet of agents from retrying in lockstep after a Proxy
    restart; keeping half the base keeps the growth real.
    """

    def __init__(self, start_s=0.5, cap_s=30.0, rand=random.random):
        self.start_s = start_s
        self.cap_s = cap_s
        self._rand = rand
        self.failures = 0

    def next_delay(self) -> float:
        base = min(self.cap_s, self.start_s * 2 ** min(self.failures, 32))
        self.failures += 1
        return base * (0.5 + 0.5 * self._rand())

    def reset(self):
        self.failures = 0


class FailureLog:
    """Logs the first failure of a streak, then at most one summary per ``every_s``."""

    def __init__(self, logger=log, clock=time.monotonic, every_s=60.0):
        self._log = logger
        self._clock = clock
        self._every_s = every_s
        self.streak = 0
        self._streak_started = None
        self._logged_at = None
        self._since_logged = 0

    def failure(self, message):
        now = self._clock()
        if self.streak == 0:
            self._streak_started = self._logged_at = now
            self._since_logged = 0
            self._log.warning("%s; retrying with backoff (further failures summarised every %d s)",
                              message, self._every_s)
        else:
            self._since_logged += 1
            if now - self._logged_at >= self._every_s:
                self._log.warning("still failing: %d more failures in the last %d s; latest: %s",
                                  self._since_logged, round(now - self._logged_at), message)
                self._logged_at = now
                self._since_logged = 0
        self.streak += 1

    def success(self):
        if self.streak:
            self._log.info("Proxy reachable again after %d failed attempts over %d s",
                           self.streak, round(self._clock() - self._streak_started))
        self.streak = 0


class SteppingThread:
    """A thread that calls ``self.step()`` and waits what it returns, for as long as it is not stopped.

    The subclass calls ``_start_stepping`` from its constructor and names its ``thread_name``; a surprise
    in a step is logged and waited out with backoff, and a failed step schedules its retry with ``_retry_later``.
    """

    thread_name = "fleetwatch-reporter"

    def _start_stepping(self, client, backoff, clock):
        """The state every stepping thread keeps: ``client`` has ``timeout_s`` and ``close()``."""
        self._client = client
        self._backoff = backoff or Backoff()
        self._clock = clock
        self._retry_at = None
        self._stop = threading.Event()
        self._thread = None

    def _backing_off(self, now):
        """Seconds left of the wait a failure scheduled, or None when no retry is pending."""
        if self._retry_at is not None:
            if now < self._retry_at:
                return self._retry_at - now
            self._retry_at = None
        return None

    def _retry_later(self):
        """Schedule the next try after the backoff; return the seconds to wait for it."""
        self._retry_at = self._clock() + self._backoff.next_delay()
        return self._until_retry()

    def _until_retry(self):
        # From the clock now, not from the round's start: a request that timed
        # out has already used part of the wait.
        return max(0.0, self._retry_at - self._clock())

    def start(self):
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                delay = self.step()
            except Exception:  # noqa: BLE001 - the thread must outlive any surprise
                log.exception("%s: a step failed", self.thread_name)
                delay = self._backoff.next_delay()
            self._stop.wait(max(delay, 0.005))

    def stop(self, timeout_s=None):
        """Stop the thread; waits at most for one in-flight request."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s if timeout_s is not None else self._client.timeout_s + 1)

    def close(self):
        self._client.close()


class Reporter(SteppingThread):
    """Keeps one instance registered and reported at a Proxy."""

    def __init__(self, client: ProxyClient, store, *, instance_id, host, port, meta=None, register=True,
                 report_interval_s=1.0, on_instance_id=None, clock=time.monotonic, clock_wall_ms=wall_ms,
                 backoff=None, failure_log=None):
        self._start_stepping(client, backoff, clock)
        self._store = store
        self._host = host
        self._port = port
        self._meta = dict(meta or {})
        self._register_enabled = register
        self._interval_s = report_interval_s
        self._on_instance_id = on_instance_id
        self._wall_ms = clock_wall_ms
        self._failures = failure_log or FailureLog(clock=clock)
        self.instance_id = instance_id
        self.registered = False
        self.registrations = 0  # successful registers so far: the tokenizer offers go again after each
        self.heartbeat_interval_s = DEFAULT_HEARTBEAT_S
        self.report_seq = 0
        self._next_report_at = None
        self._next_heartbeat_at = None

    def forget_registration(self):
        """Register again on the next round: another thread (the prefix reporter) heard the Proxy forgot us."""
        if self._register_enabled:
            self.registered = False

    # --- one round ------------------------------------------------------------

    def step(self) -> float:
        """Do what is due now; return the seconds until something is due again."""
        now = self._clock()
        wait = self._backing_off(now)
        if wait is not None:
            return wait
        if self._register_enabled and not self.registered:
            if not self._settle(self._register(), "register"):
                return self._until_retry()
        if self._next_report_at is None:
            self._next_report_at = now
        if self._next_heartbeat_at is None:
            self._next_heartbeat_at = now + self.heartbeat_interval_s
        if now >= self._next_report_at:
            if self._store.latest() is not None and not self._settle(self._send_snapshot(), "snapshot report"):
                return self._until_retry()
            self._next_report_at = _next_slot(self._next_report_at, self._interval_s, self._clock())
        if now >= self._next_heartbeat_at:
            if not self._settle(self._client.post(HEARTBEAT_PATH, {"instance_id": self.instance_id}), "heartbeat"):
                return self._until_retry()
            self._next_heartbeat_at = self._clock() + self.heartbeat_interval_s
        return max(0.0, min(self._next_report_at, self._next_heartbeat_at) - self._clock())

    def _settle(self, answer: Answer, what) -> bool:
        """Book an answer: True to go on, False when a retry has been scheduled."""
        if answer.kind == UNKNOWN_INSTANCE and self._register_enabled:
            log.info("Proxy does not know instance %s (restarted or wiped?); registering again", self.instance_id)
            self.registered = False
            answer = self._register()
            what = "register"
        if answer.kind == OK:
            self._backoff.reset()
            self._failures.success()
            return True
        if answer.kind == UNKNOWN_INSTANCE:
            detail = "Proxy does not know this instance and registering is switched off"
        else:
            detail = answer.detail
        self._failures.failure(f"{what} to {self._client.base_url} as {self.instance_id} failed: {detail}")
        self._retry_later()
        return False

    def _register(self) -> Answer:
        body = {"instance_id": self.instance_id, "host": self._host, "port": self._port, "meta": self._meta}
        answer = self._client.post(REGISTER_PATH, body)
        if answer.kind != OK:
            return answer
        data = answer.data if isinstance(answer.data, dict) else {}
        assigned = data.get("instance_id")
        if isinstance(assigned, str) and assigned and assigned != self.instance_id:
            self.instance_id = assigned
            if self._on_instance_id is not None:
                self._on_instance_id(assigned)
        interval = data.get("heartbeat_interval_s")
        if isinstance(interval, (int, float)) and not isinstance(interval, bool) and interval > 0:
            self.heartbeat_interval_s = float(interval)
        self.registered = True
        self.registrations += 1
        self._next_heartbeat_at = self._clock() + self.heartbeat_interval_s
        log.info("registered at %s as %s (heartbeat every %g s)", self._client.base_url, self.instance_id,
                 self.heartbeat_interval_s)
        return answer

    def _send_snapshot(self) -> Answer:
        snapshot, encoded = self._store.latest_pair()
        self.report_seq += 1
        metadata = {
            "reported_instance_id": snapshot.get("instance_id"),
            "report_monotonic_ms": int(self._clock() * 1000),
            "report_wall_time_ms": self._wall_ms(),
            "agent_snapshot_timestamp_ms": snapshot.get("timestamp_ms"),
            "report_seq": self.report_seq,
        }
        # The store already holds the snapshot's JSON: splice it in rather
        # than encode the same object a second time every report.
        body = b"".join((
            b'{"instance_id":', json.dumps(self.instance_id).encode(),
            b',"snapshot":', encoded,
            b',"metadata":', json.dumps(metadata, separators=(",", ":")).encode(), b"}",
        ))
        return self._client.post(SNAPSHOT_PATH, body)

    # --- one-shot use (--once) -----------------------------------------------

    def report_once(self) -> Answer:
        """Register if asked, then send the store's snapshot once; no retries."""
        if self._register_enabled and not self.registered:
            answer = self._register()
            if answer.kind != OK:
                return answer
        if self._store.latest() is None:
            return Answer(REJECTED, detail="no snapshot to report")
        answer = self._send_snapshot()
        if answer.kind == UNKNOWN_INSTANCE and self._register_enabled:
            self.registered = False
            answer = self._register()
            if answer.kind == OK:
                answer = self._send_snapshot()
        return answer

    def unregister(self) -> bool:
        """Best-effort unregister at shutdown; only when this agent registered the instance."""
        if not (self._register_enabled and self.registered):
            return False
        answer = self._client.post(UNREGISTER_PATH, {"instance_id": self.instance_id}, timeout_s=UNREGISTER_TIMEOUT_S)
        self.registered = False
        if answer.kind == OK:
            log.info("unregistered %s", self.instance_id)
            return True
        if answer.kind == REJECTED and isinstance(answer.data, dict) and "error" not in answer.data:
            log.info("Proxy no longer knew %s at unregister", self.instance_id)
            return True
        log.warning("unregister of %s failed: %s", self.instance_id, answer.detail)
        return False


def _next_slot(previous_at, interval_s, now):
    """The next fixed-rate slot after ``now``; missed slots are skipped, not bursted."""
    next_at = previous_at + interval_s
    if next_at <= now:
        next_at = now + interval_s - (now - next_at) % interval_s
    return next_at

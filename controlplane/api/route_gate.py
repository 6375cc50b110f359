"""The route lane's admission (issue 30): placement and feedback may take at most ``FLEETWATCH_ROUTE_SHARE`` of
each web process's time; beyond it a 429 with ``Retry-After``, in SPEC section 1's envelope.

Route tokens are never rate limited (a router asks once per request it routes), and routers share the web
processes with the agents' reports. A web process's threads share one GIL (``up`` runs
``FLEETWATCH_WEB_THREADS`` of them so reports can share a commit), so a few hundred placements asked at
once put seconds of placement work in front of every report. A bound on time per process limits that: the gate is a token bucket of route time, filled at ``FLEETWATCH_ROUTE_SHARE``
seconds a second and never above ``BURST_S``, from which each admitted request's time is taken. An empty
bucket refuses at once (after the token and the small body, before any placement work), so a flood costs
the process its refusals and at most the share, and a report waits behind a few milliseconds of placement,
not behind the flood.

Two rules keep a burst of route requests from queueing in front of the reports (measured with
``bench.flood``, bench/README.md): an admitted request takes what such a request has been costing from the
bucket as it enters (``expected``; its real time is settled when it ends), so a wave of routers coming back
together is admitted only as far as the bucket holds, not all at once before the first one has been
charged; and the write lane goes first: an admitted route request waits, at most ``YIELD_S``, until no
write (a report, a heartbeat, a register) is in flight in its process, so the reports do not wait for the
GIL behind a placement that could as well have started a few milliseconds later.
"""

import threading
import time

from django.conf import settings
from rest_framework import exceptions

# What a refused router is told to wait, in turn: long against the few milliseconds the bucket needs to
# fill again, so a flood that honours it goes quiet, short against a routed request's own timeouts, and
# not all the same, so the routers refused in one burst do not all come back in the same instant.
RETRY_AFTER_S = (1, 2, 3)
# The most route time a process gives at once after a quiet spell: a few placements, so that a report
# never waits behind more than this.
BURST_S = 0.05
# The longest an admitted route request waits for the writes in flight in its process to end: a few
# reports' time, so that a steady stream of writes delays routing by at most this, never stops it.
YIELD_S = 0.02
# How fast ``expected`` follows the admitted requests' cost: about the last five.
EXPECTED_WEIGHT = 0.2


class RouteBusy(exceptions.Throttled):
    """The route lane of this process has used its share (answered as every 429, with ``Retry-After``)."""


class RouteGate:
    """The bucket of one process (its threads share it, under a lock); ``clock`` is injected for the tests."""

    def __init__(self, share, burst_s=BURST_S, clock=time.perf_counter, yield_s=YIELD_S):
        self.share, self.burst_s, self.clock, self.yield_s = share, burst_s, clock, yield_s
        self.tokens = burst_s
        self.filled_at = clock()
        self.refusals = 0
        self.expected = 0.0  # what an admitted request has been costing, taken from the bucket as it enters
        self.writes = 0  # the write-lane requests in flight in this process
        self.lock = threading.Lock()
        self.no_writes = threading.Condition(self.lock)

    @property
    def open(self):
        return self.share >= 1

    def enter(self):
        """Whether a route request may start now: the bucket, filled for the time since, is not empty; an admitted
        request's ``expected`` cost is taken at once (``spend`` settles it)."""
        if self.open:
            return True
        with self.lock:
            now = self.clock()
            self.tokens = min(self.burst_s, self.tokens + (now - self.filled_at) * self.share)
            self.filled_at = now
            if self.tokens > 0:
                self.tokens -= self.expected
                return True
            self.refusals += 1
            return False

    def retry_after_s(self):
        """How long the last refused request is told to wait: ``RETRY_AFTER_S`` in turn."""
        return RETRY_AFTER_S[self.refusals % len(RETRY_AFTER_S)]

    def spend(self, seconds):
        """Settle an admitted request: its ``seconds`` from the bucket instead of the ``expected`` taken as it entered;
        below empty after a long one (a board's full read), but never more than ``burst_s`` below, so one slow
        answer refuses for ``burst_s / share`` at most."""
        if not self.open:
            with self.lock:
                self.tokens = max(-self.burst_s, self.tokens + self.expected - seconds)
                self.expected += EXPECTED_WEIGHT * (seconds - self.expected)

    def write_started(self):
        with self.lock:
            self.writes += 1

    def write_ended(self):
        with self.lock:
            self.writes -= 1
            if not self.writes:
                self.no_writes.notify_all()

    def after_writes(self):
        """Wait until no write is in flight in this process, ``yield_s`` at most (the write lane goes first)."""
        if not self.open:
            with self.lock:
                self.no_writes.wait_for(lambda: not self.writes, timeout=self.yield_s)


_gate = None
# When the request this thread answers entered the application (``stamp_arrival``): what an admitted route
# request costs is all of its time in the process (the hot lane's floor, the token, the JSON, the answer),
# several times its placement alone.
_arrival = threading.local()


def stamp_arrival(application):
    """The WSGI ``application`` noting when each request enters it, for ``admitted`` to charge from."""

    def stamped(environ, start_response):
        _arrival.at = time.perf_counter()
        try:
            return application(environ, start_response)
        finally:
            _arrival.at = None

    stamped.__wrapped__ = application
    return stamped


def gate():
    """This process's gate, made at first use from the settings (again when the setting changes: tests)."""
    global _gate
    if _gate is None or _gate.share != settings.FLEETWATCH_ROUTE_SHARE:
        _gate = RouteGate(settings.FLEETWATCH_ROUTE_SHARE)
    return _gate


def admitted(respond, data, grant):
    """``respond(data, grant)`` with the request's time in the process taken from the bucket, once the writes in
    flight have ended, or ``RouteBusy`` when the bucket is empty."""
    lane = gate()
    if not lane.enter():
        raise RouteBusy(lane.retry_after_s())
    started = getattr(_arrival, "at", None) or lane.clock()  # no stamp: Django's test client
    try:
        lane.after_writes()
        return respond(data, grant)
    finally:
        lane.spend(lane.clock() - started)


def writing(respond, data, grant):
    """``respond(data, grant)`` counted as a write in flight, which admitted route requests let go first."""
    lane = gate()
    if lane.open:
        return respond(data, grant)
    lane.write_started()
    try:
        return respond(data, grant)
    finally:
        lane.write_ended()

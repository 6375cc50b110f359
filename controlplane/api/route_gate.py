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


class RouteBusy(exceptions.Throttled):
    """The route lane of this process has used its share (answered as every 429, with ``Retry-After``)."""


class RouteGate:
    """The bucket of one process (its threads share it, under a lock); ``clock`` is injected for the tests."""

    def __init__(self, share, burst_s=BURST_S, clock=time.perf_counter):
        self.share, self.burst_s, self.clock = share, burst_s, clock
        self.tokens = burst_s
        self.filled_at = clock()
        self.refusals = 0
        self.lock = threading.Lock()

    @property
    def open(self):
        return self.share >= 1

    def enter(self):
        """Whether a route request may start now: the bucket, filled for the time since, is not empty."""
        if self.open:
            return True
        with self.lock:
            now = self.clock()
            self.tokens = min(self.burst_s, self.tokens + (now - self.filled_at) * self.share)
            self.filled_at = now
            if self.tokens > 0:
                return True
            self.refusals += 1
            return False

    def retry_after_s(self):
        """How long the last refused request is told to wait: ``RETRY_AFTER_S`` in turn."""
        return RETRY_AFTER_S[self.refusals % len(RETRY_AFTER_S)]

    def spend(self, seconds):
        """Take an admitted request's ``seconds`` from the bucket: below empty after a long one (a board's full
        read), but never more than ``burst_s`` below, so one slow answer refuses for ``burst_s / share`` at most."""
        if not self.open:
            with self.lock:
                self.tokens = max(-self.burst_s, self.tokens - seconds)


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
    """``respond(data, grant)`` with the request's time in the process taken from the bucket, or ``RouteBusy``
    when the bucket is empty."""
    lane = gate()
    if not lane.enter():
        raise RouteBusy(lane.retry_after_s())
    started = getattr(_arrival, "at", None) or lane.clock()  # no stamp: Django's test client
    try:
        return respond(data, grant)
    finally:
        lane.spend(lane.clock() - started)

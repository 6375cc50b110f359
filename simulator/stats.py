"""What a simulator run saw: requests by kind and outcome, client-side latency, fleet events.

Counts and histograms only, so the state of one process is small, plain
(``to_wire``) and adds up across processes (``FleetStats.merged``). Latency
goes into buckets 2 % wide: percentiles are exact to about 1 %, in bounded
memory however long the run.
"""

from __future__ import annotations

import math
from collections import Counter

REQUESTS = ("register", "heartbeat", "snapshot", "unregister")

OK = "ok"
# Answers that are not failures but not acknowledgements either: the Proxy
# asks for the capabilities again (SPEC 3.2).
CAPABILITY_RESYNC = "capability_resync"
NOTICES = frozenset({CAPABILITY_RESYNC})
# Failure kinds. HTTP statuses are "http_<code>".
UNKNOWN_INSTANCE = "unknown_instance"
CONNECTION_ERROR = "connection_error"
TIMEOUT = "timeout"
REJECTED = "rejected"  # a 2xx answer with ok false for another reason
BAD_ANSWER = "bad_answer"  # a 2xx answer that is not the JSON object the API promises
CLIENT_ERROR = "client_error"  # any other failure of the HTTP client


def http_status(code):
    return f"http_{code}"


class LatencyHistogram:
    """Counts of durations in logarithmic buckets 2 % wide (from 1 µs up)."""

    GROWTH = 1.02
    _LOG_GROWTH = math.log(GROWTH)

    def __init__(self, buckets=None):
        self.buckets = Counter(buckets or {})

    def add(self, seconds):
        micros = max(seconds * 1e6, 1.0)
        self.buckets[int(math.log(micros) / self._LOG_GROWTH)] += 1

    @property
    def count(self):
        return sum(self.buckets.values())

    def merge(self, other: LatencyHistogram):
        self.buckets.update(other.buckets)

    def quantile_ms(self, q):
        """The ``q`` quantile (0–1) in milliseconds, None when empty: a bucket's geometric middle."""
        total = self.count
        if not total:
            return None
        rank = max(1, math.ceil(q * total))
        seen = 0
        for bucket in sorted(self.buckets):
            seen += self.buckets[bucket]
            if seen >= rank:
                return round(self.GROWTH ** (bucket + 0.5) / 1000.0, 3)
        raise AssertionError("unreachable")

    def summary_ms(self):
        return {"p50": self.quantile_ms(0.50), "p90": self.quantile_ms(0.90), "p99": self.quantile_ms(0.99),
                "max": self.quantile_ms(1.0)}

    def to_wire(self):
        return dict(self.buckets)


class FleetStats:
    """Everything one driver (or, merged, the whole run) counted."""

    def __init__(self):
        self.outcomes = {request: Counter() for request in REQUESTS}
        self.latency = {request: LatencyHistogram() for request in REQUESTS}
        # How late report slots started, against their schedule: a client
        # that cannot keep up shows it here first.
        self.lag = LatencyHistogram()
        self.events = Counter()
        self.registered = 0  # instances registered now
        self.silent = 0  # instances in a stale spell now
        self.in_flight = 0
        self.instances = 0
        self.elapsed_s = 0.0  # from the first report slot to the end of reporting (or now)
        self.finished = False

    # --- counting -------------------------------------------------------------

    def record(self, request, outcome, seconds):
        self.outcomes[request][outcome] += 1
        self.latency[request].add(seconds)

    def note(self, event, count=1):
        self.events[event] += count

    # --- reading --------------------------------------------------------------

    def sent(self, request=None):
        requests = REQUESTS if request is None else (request,)
        return sum(sum(self.outcomes[r].values()) for r in requests)

    def acknowledged(self, request=None):
        requests = REQUESTS if request is None else (request,)
        return sum(self.outcomes[r][OK] for r in requests)

    def errors(self, request=None):
        """Failures by kind (HTTP status, connection error, timeout, unknown_instance, ...)."""
        requests = REQUESTS if request is None else (request,)
        errors = Counter()
        for r in requests:
            for outcome, count in self.outcomes[r].items():
                if outcome != OK and outcome not in NOTICES:
                    errors[outcome] += count
        return errors

    def all_latency(self):
        merged = LatencyHistogram()
        for histogram in self.latency.values():
            merged.merge(histogram)
        return merged

    # --- across processes -----------------------------------------------------

    def to_wire(self):
        return {
            "outcomes": {r: dict(c) for r, c in self.outcomes.items()},
            "latency": {r: h.to_wire() for r, h in self.latency.items()},
            "lag": self.lag.to_wire(),
            "events": dict(self.events),
            "registered": self.registered,
            "silent": self.silent,
            "in_flight": self.in_flight,
            "instances": self.instances,
            "elapsed_s": self.elapsed_s,
            "finished": self.finished,
        }

    @classmethod
    def from_wire(cls, wire):
        stats = cls()
        for request in REQUESTS:
            stats.outcomes[request].update(wire["outcomes"].get(request, {}))
            stats.latency[request] = LatencyHistogram(wire["latency"].get(request))
        stats.lag = LatencyHistogram(wire["lag"])
        stats.events.update(wire["events"])
        for name in ("registered", "silent", "in_flight", "instances", "elapsed_s", "finished"):
            setattr(stats, name, wire[name])
        return stats

    @classmethod
    def merged(cls, parts):
        """One view of several processes' stats: counts add up, the run lasts as long as its longest part."""
        total = cls()
        parts = list(parts)
        for part in parts:
            for request in REQUESTS:
                total.outcomes[request].update(part.outcomes[request])
                total.latency[request].merge(part.latency[request])
            total.lag.merge(part.lag)
            total.events.update(part.events)
            total.registered += part.registered
            total.silent += part.silent
            total.in_flight += part.in_flight
            total.instances += part.instances
            total.elapsed_s = max(total.elapsed_s, part.elapsed_s)
        total.finished = bool(parts) and all(part.finished for part in parts)
        return total


def summary(stats: FleetStats, config):
    """The run's summary as plain JSON values (what ``--json`` writes and the table shows).

    ``config`` is the run's ``RunConfig``. The target rate is the whole fleet
    reporting every interval; ``due`` counts the slots that came up, which a
    ramped start, stale spells and a stop cut short.
    """
    elapsed = stats.elapsed_s
    target = config.instances * 1000.0 / config.interval_ms
    snapshots_sent = stats.sent("snapshot")
    snapshots_acked = stats.acknowledged("snapshot")
    due = sum(stats.events[name] for name in ("report_slots", "skipped_slots", "backoff_slots", "shed_slots"))
    reporting = due - stats.events["silent_slots"]
    errors = stats.errors()

    def per_s(count):
        return round(count / elapsed, 2) if elapsed else None

    return {
        "proxy_url": config.proxy_url,
        "instances": config.instances,
        "interval_ms": config.interval_ms,
        "processes": config.processes,
        "connections_per_process": config.connections,
        "ramp_s": config.ramp_rounds * config.interval_ms / 1000.0,
        "seed": config.seed,
        # False with --no-unregister: the instances stay registered after the run.
        "unregistered_at_end": config.unregister,
        "elapsed_s": round(elapsed, 3),
        "sent": stats.sent(),
        "acknowledged": stats.acknowledged(),
        "errors": sum(errors.values()),
        "errors_by_kind": dict(sorted(errors.items())),
        "latency_ms": stats.all_latency().summary_ms(),
        "requests": {
            request: {
                "sent": stats.sent(request),
                "acknowledged": stats.acknowledged(request),
                "errors": sum(stats.errors(request).values()),
                "latency_ms": stats.latency[request].summary_ms(),
            }
            for request in REQUESTS
        },
        "rate": {
            "target_per_s": round(target, 2),
            "due_per_s": per_s(due),
            "sent_per_s": per_s(snapshots_sent),
            "achieved_per_s": per_s(snapshots_acked),
            "achieved_ratio": round(snapshots_acked / elapsed / target, 4) if elapsed and target else None,
            # Of the slots where a host meant to report (not silent): how many were acknowledged.
            "acknowledged_of_due": round(snapshots_acked / reporting, 4) if reporting > 0 else None,
        },
        "schedule_lag_ms": stats.lag.summary_ms(),
        "events": dict(sorted(stats.events.items())),
    }

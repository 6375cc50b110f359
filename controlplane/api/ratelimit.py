"""Rate limits on writes (SPEC 10): per token and instance id, shared by every web process.

A fixed window of ``FLEETWATCH_RATE_WINDOW_S`` seconds allows
``FLEETWATCH_RATE_LIMIT`` writes per key. The count lives in Django's cache
(Redis when configured, else a file-based cache every process on the host
shares), but a process does not touch the cache on every request: it counts
locally, shares nothing until a key's local count in the window reaches a
quarter of the limit, and from then on adds its count to the shared one
every ``FLUSH_EVERY`` requests, deciding on shared + local. An agent at 1 Hz
(about 66 writes a minute against 300) never costs a cache operation; a
burst does. One process decides exactly; several let through at most a
quarter of the limit each before their counts meet, so with the default
300 a minute a 600-request burst is cut whether it comes over one
connection or is spread over two web processes.
"""

import math
import threading

from django.conf import settings
from django.core.cache import caches

FLUSH_EVERY = 10
SHARE_FROM = 0.25  # of the limit: below it a key's count stays in the process
CACHE_ALIAS = "ratelimit"


class WindowCounter:
    """This process's view of the shared counters."""

    def __init__(self, cache_alias=CACHE_ALIAS):
        self._cache_alias = cache_alias
        self._local = {}  # (key, window) -> [unflushed count, shared count seen at the last flush]
        self._lock = threading.Lock()

    def hit(self, key, now):
        """Count one request of ``key`` at ``now``; ``(allowed, retry_after_s)``."""
        limit, window_s = settings.FLEETWATCH_RATE_LIMIT, settings.FLEETWATCH_RATE_WINDOW_S
        window = math.floor(now / window_s)
        slot = (key, window)
        with self._lock:
            if len(self._local) > 50_000:
                self._forget_before(window)
            counts = self._local.setdefault(slot, [0, 0])
            counts[0] += 1
            flush = counts[0] >= max(FLUSH_EVERY, limit * SHARE_FROM if not counts[1] else 0)
            if flush:
                pending, counts[0] = counts[0], 0
            total = counts[0] + counts[1]
        if flush:
            shared = self._add(f"fw-rate:{key}:{window}", pending, window_s)
            with self._lock:
                counts[1] = shared
            total = shared + counts[0]
        if total > limit:
            return False, max(1, math.ceil((window + 1) * window_s - now))
        return True, 0

    def _add(self, name, amount, window_s):
        cache = caches[self._cache_alias]
        try:
            if cache.add(name, amount, timeout=window_s * 2):
                return amount
            return cache.incr(name, amount)
        except ValueError:  # expired between add and incr
            cache.set(name, amount, timeout=window_s * 2)
            return amount

    def _forget_before(self, window):
        for slot in [slot for slot in self._local if slot[1] < window]:
            del self._local[slot]


COUNTER = WindowCounter()

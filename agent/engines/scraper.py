"""Scraping the serving engines' ``/metrics`` in the background (SPEC 13).

Each engine URL has one worker thread and one kept-alive HTTP connection.
The sampler asks for a scrape at the start of each tick and takes whatever
the newest finished scrape says at its end, never waiting: a slow or hung
engine cannot delay a snapshot, the agent's HTTP answers or its reports.
A scrape still running when the next tick asks is not started again (one
thread per engine, never more), and once it has run past the timeout the
engine is reported ``timeout`` with null figures even while the thread is
still stuck (in a DNS lookup, say, which no socket timeout covers).

The HTTP client is ``engine_http.MetricsFetcher``, the reading of the answer
``engine_figures.EngineTracker``. The same thread reads what the engine
serves (``/v1/models``, SPEC 16.1; ``agent.engines.served``) when that is due,
after the scrape's figures are published: each object's ``served``.
"""

from __future__ import annotations

import logging
import threading
import time

from agent.engines.figures import BAD_FORMAT, OK, TIMEOUT, EngineTracker
from agent.engines.http import MetricsFetcher
from agent.engines.served import ServedReader
from agent.sampler import monotonic_ms, wall_ms

log = logging.getLogger(__name__)


class EngineScraper:
    """One engine URL: a worker thread that scrapes when asked, and the objects of its newest scrape."""

    def __init__(self, url, timeout_ms=500, window_ms=10_000, clock_ms=monotonic_ms, clock_wall_ms=wall_ms,
                 fetcher=None, name="fleetwatch-engine", models_interval_ms=None, models_fetcher=None):
        self.url = url
        self._timeout_ms = timeout_ms
        self._clock_ms = clock_ms
        self._wall_ms = clock_wall_ms
        self._fetcher = fetcher or MetricsFetcher(url, timeout_ms / 1000.0)
        self._tracker = EngineTracker(url, window_ms)
        # None: /v1/models is not read (served stays null).
        self._served = None if models_interval_ms is None else ServedReader(
            url, timeout_ms / 1000.0, models_interval_ms, clock_ms, models_fetcher)
        self._changed = threading.Condition()
        self._asked = threading.Event()
        self._stopping = False
        self._busy_since = None  # (monotonic ms, wall ms) of the scrape asked for and not finished
        self._objects = None
        self._last_status = None
        # Called on this thread after each scrape (the sampling loop puts a snapshot with the new figures then).
        self.on_scraped = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self):
        self._thread.start()

    def stop(self, timeout_s=2.0):
        self._stopping = True
        self._asked.set()
        if self._thread.ident is not None:
            self._thread.join(timeout_s)
        if not self._thread.is_alive():
            self._fetcher.close()
            if self._served is not None:
                self._served.close()

    def request(self) -> bool:
        """Ask for a scrape; False (and nothing started) while the previous one is still running."""
        with self._changed:
            if self._busy_since is not None:
                return False
            self._busy_since = (self._clock_ms(), self._wall_ms())
        self._asked.set()
        return True

    def wait_idle(self, timeout_s) -> bool:
        """Wait (real time) until no scrape is running; for the first sample only."""
        with self._changed:
            return self._changed.wait_for(lambda: self._busy_since is None, timeout_s)

    def objects(self) -> list:
        """The engine objects of the newest finished scrape, or ``timeout`` ones for an overdue scrape."""
        with self._changed:
            busy, objects = self._busy_since, self._objects
        if busy is not None and self._clock_ms() - busy[0] > self._timeout_ms:
            # Overdue: whatever the thread is stuck in, the figures are unknown now.
            objects = self._tracker.failed(TIMEOUT, f"no answer within {self._timeout_ms} ms", busy[1], None)
        elif objects is None:
            objects = self._tracker.failed(TIMEOUT, "no answer yet", busy[1] if busy else self._wall_ms(), None)
        self._note_status(objects)
        served = self.served()
        return [{**obj, "served": served} for obj in objects]

    def served(self):
        """The newest ``/v1/models`` list (SPEC 16.1), or None when not read (or its last read failed)."""
        return None if self._served is None else self._served.served

    def model_of(self, engine_index) -> str | None:
        """The model the newest finished scrape names for the engine labelled ``engine_index`` (KV events' seed)."""
        with self._changed:
            objects = self._objects or ()
        for obj in objects:
            if _rank(obj) == engine_index and obj.get("model"):
                return obj["model"]
        return None

    def _run(self):
        while True:
            self._asked.wait()
            self._asked.clear()
            if self._stopping:
                return
            self._scrape()

    def _scrape(self):
        with self._changed:
            if self._busy_since is None:
                return
            at_ms, scraped_at_ms = self._busy_since
        started = time.perf_counter()
        status, error, text = self._fetcher.fetch()
        scrape_ms = (time.perf_counter() - started) * 1000.0
        try:
            if status == OK:
                objects = self._tracker.observe(text, at_ms, scraped_at_ms, scrape_ms)
            else:
                objects = self._tracker.failed(status, error, scraped_at_ms, scrape_ms)
        except Exception as failure:  # noqa: BLE001 - an odd answer must not end the worker
            log.exception("engine %s: reading its metrics failed", self.url)
            objects = self._tracker.failed(BAD_FORMAT, f"agent_error:{type(failure).__name__}", scraped_at_ms,
                                           scrape_ms)
        with self._changed:
            self._objects = objects
            self._busy_since = None
            self._changed.notify_all()
        if self.on_scraped is not None:
            self.on_scraped()
        if self._served is not None and self._served.due():
            self._read_served()

    def _read_served(self):
        """Read ``/v1/models`` (after the figures went out: a snapshot never waits on it)."""
        before = self._served.served
        try:
            self._served.read()
        except Exception:  # noqa: BLE001 - an odd answer must not end the worker
            log.exception("engine %s: reading its /v1/models failed", self.url)
            self._served.served = None
        if self._served.served != before and self.on_scraped is not None:
            self.on_scraped()

    def _note_status(self, objects):
        status = objects[0]["status"] if objects else None
        if status != self._last_status:
            level = logging.INFO if status == OK else logging.WARNING
            log.log(level, "engine %s: %s -> %s %s", self.url, self._last_status, status,
                    (objects[0]["error"] or "") if objects else "")
            self._last_status = status


class EngineScrapers:
    """Every configured engine URL, scraped on each sample tick (SPEC 13), with its KV events when configured (15.2).

    ``subscribers`` pairs with ``urls`` in order (a ``KvSubscriber`` or None); it
    may be shorter. Each engine object gains ``kv_events``: its rank's figures,
    or null for an engine without an event endpoint.
    """

    def __init__(self, urls, timeout_ms=500, window_ms=10_000, clock_ms=monotonic_ms, clock_wall_ms=wall_ms,
                 subscribers=(), models_interval_ms=None):
        self.timeout_ms = timeout_ms
        self.scrapers = [EngineScraper(url, timeout_ms, window_ms, clock_ms, clock_wall_ms,
                                       name=f"fleetwatch-engine-{n}", models_interval_ms=models_interval_ms)
                         for n, url in enumerate(urls)]
        self.subscribers = list(subscribers) + [None] * (len(self.scrapers) - len(subscribers))

    def start(self):
        for worker in self._workers():
            worker.start()

    def stop(self):
        for worker in self._workers():
            worker.stop()

    def _workers(self):
        """Each engine's scraper, and its event subscriber where it has one: the threads this set runs."""
        return [*self.scrapers, *(subscriber for subscriber in self.subscribers if subscriber is not None)]

    def prime(self):
        """Scrape every engine once and wait for the answers, at most the timeout (start and ``--once``)."""
        self.request()
        self.wait_idle(slack_s=0.05)

    def request(self) -> bool:
        """Ask every engine for a scrape; False when one was still busy with an earlier one (not asked again)."""
        started = [scraper.request() for scraper in self.scrapers]
        return all(started)

    def on_each_scrape(self, callback):
        """Have ``callback()`` called on an engine's thread each time its scrape has finished."""
        for scraper in self.scrapers:
            scraper.on_scraped = callback

    def wait_idle(self, slack_s=0.0):
        """Wait until every scrape asked for has finished, at most the timeout (and ``slack_s``)."""
        deadline = time.monotonic() + self.timeout_ms / 1000.0 + slack_s
        for scraper in self.scrapers:
            scraper.wait_idle(max(0.0, deadline - time.monotonic()))

    def served(self) -> list:
        """Every engine's newest ``served`` list in URL order (None for one not read): the tokenizer offers'
        source (``agent.tokenizer_offer``)."""
        return [scraper.served() for scraper in self.scrapers]

    def objects(self) -> list:
        out = []
        for scraper, subscriber in zip(self.scrapers, self.subscribers):
            for obj in scraper.objects():
                figures = None
                if subscriber is not None:
                    rank = _rank(obj)
                    subscriber.want_rank(rank)  # a data-parallel engine's other ranks publish on the next ports
                    figures = subscriber.figures(rank)
                out.append({**obj, "kv_events": figures})
        return out


def _rank(obj) -> int:
    """The data-parallel rank of an engine object: vLLM's ``engine`` label, 0 when it has none."""
    index = obj.get("engine_index")
    return int(index) if isinstance(index, str) and index.isdigit() else 0

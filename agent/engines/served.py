"""What an engine serves (SPEC 16.1): its ``GET /v1/models``, read at start and then every 30 s.

vLLM lists its base model and every LoRA adapter it has loaded::

    {"object": "list", "data": [{"id": "tiny", "root": "/models/tiny", "parent": null, ...},
                                {"id": "sql-lora", "root": "/adapters/sql", "parent": "tiny", ...}]}

``ServedReader`` keeps the newest list as ``[{"id", "root", "parent"}]`` (at
most ``MAX_SERVED``), or None when it has not been read or the last read
failed: "unknown", never the list of an earlier read. It runs on its engine's
scraper thread after a scrape has been published (``agent.engines.scraper``),
so a read never delays a snapshot; one GET every 30 s on a connection of its
own costs next to nothing.
"""

from __future__ import annotations

import json
import logging

from agent.engines.figures import OK
from agent.engines.http import MetricsFetcher

log = logging.getLogger(__name__)

MAX_SERVED = 64
MAX_TEXT = 1024  # an id, a root or a parent longer than this is not a model name or a path we would use


def parse_served(text):
    """The ``served`` list of a ``/v1/models`` answer, or None when it is not one."""
    try:
        answer = json.loads(text)
    except ValueError:
        return None
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        return None
    served = []
    for item in data:
        if not isinstance(item, dict) or not _text(item.get("id")):
            continue
        served.append({"id": item["id"], "root": _text(item.get("root")), "parent": _text(item.get("parent"))})
        if len(served) == MAX_SERVED:
            break
    return served


def _text(value):
    return value if isinstance(value, str) and 0 < len(value) <= MAX_TEXT else None


class ServedReader:
    """One engine's ``/v1/models``: read when due (``interval_ms`` of ``clock_ms``), kept until the next read."""

    def __init__(self, url, timeout_s, interval_ms, clock_ms, fetcher=None):
        self.url = url
        self._interval_ms = interval_ms
        self._clock_ms = clock_ms
        self._fetcher = fetcher or MetricsFetcher(url, timeout_s, path="/v1/models", accept="application/json")
        self._read_at = None
        self.served = None

    def due(self) -> bool:
        return self._read_at is None or self._clock_ms() - self._read_at >= self._interval_ms

    def read(self):
        """GET ``/v1/models`` now; ``served`` becomes its list, or None when the read failed."""
        self._read_at = self._clock_ms()
        status, error, text = self._fetcher.fetch()
        served = parse_served(text) if status == OK else None
        if served is None and self.served is not None:
            log.warning("engine %s: /v1/models unreadable (%s)", self.url, error or "not a model list")
        self.served = served
        # One read every 30 s: a connection kept that long is one the engine has closed anyway.
        self._fetcher.close()
        return served

    def close(self):
        self._fetcher.close()

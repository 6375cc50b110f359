"""Which tokenizer a model's prompts are tokenized with, in this web process (SPEC 16.2).

First match wins: the operator's ``FLEETWATCH_TOKENIZERS`` (``{model id:
directory}``, read from this host's disk when a model is first asked for), then
the files the agents offered and uploaded (``proxy_app.tokenizers.store``),
which every process looks for again every ``FLEETWATCH_TOKENIZER_REFRESH_S``
(2 s: a stored tokenizer is used within 5 s everywhere). A tokenizer is loaded once per process for the
same files, whichever models share it; files that do not load are not tried
again, and their error is kept with them for the admin.
"""

from __future__ import annotations

import threading
import time

from django.conf import settings

from proxy_app.tokenizers import store
from proxy_app.tokenizers.loaded import TOKENIZER_JSON, LoadError, ModelTokenizer, directory_files
from proxy_app.tokenizers.segments import SegmentCache

OPERATOR, AGENT = "operator", "agent"


class TokenizerRegistry:
    """This process's tokenizers by model, kept from the operator's map and the agents' stored files."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self._lock = threading.Lock()
        self.cache = None
        self.reset()

    def reset(self):
        with self._lock:
            self._loaded = {}  # (source, files key) -> ModelTokenizer, or the LoadError's text
            self._agent_sets = {}  # model -> {file name: sha256}, as stored
            self._marker = None
            self._checked_at = None
            self.cache = SegmentCache(int(settings.FLEETWATCH_TOKENIZER_CACHE_MB * 1024 * 1024))

    def lookup(self, model):
        """``(tokenizer, None)`` for ``model``, or ``(None, why)``: ``no_tokenizer`` with the reason's text."""
        with self._lock:
            directory = settings.FLEETWATCH_TOKENIZERS.get(model)
            if directory is not None:
                return self._load((OPERATOR, directory), lambda: directory_files(directory), OPERATOR)
            self._refresh()
            files = self._agent_sets.get(model)
            if files is None:
                return None, "no tokenizer is known for this model"
            key = (AGENT, tuple(sorted(files.items())))
            first_try = key not in self._loaded
            found = self._load(key, lambda: self._stored(files), AGENT)
            if found[0] is None and first_try:
                store.record_error(model, files.get(TOKENIZER_JSON), found[1])
            return found

    def _load(self, key, read, source):
        known = self._loaded.get(key)
        if known is None:
            try:
                known = ModelTokenizer(read(), source, self.cache)
            except LoadError as error:
                known = str(error)
            self._loaded[key] = known
        return (known, None) if isinstance(known, ModelTokenizer) else (None, known)

    @staticmethod
    def _stored(files):
        out = {}
        for name, digest in files.items():
            data = store.file_bytes(digest)
            if data is None:
                raise LoadError(f"{name} ({digest}) is not stored")
            out[name] = data
        return out

    def _refresh(self):
        now = self.clock()
        if self._checked_at is not None and now - self._checked_at < settings.FLEETWATCH_TOKENIZER_REFRESH_S:
            return
        self._checked_at = now
        if not settings.FLEETWATCH_TOKENIZERS_FROM_AGENTS:
            self._agent_sets = {}
            return
        marker = store.changed_marker()
        if marker != self._marker:
            self._agent_sets = store.agent_sets()
            self._marker = marker


TOKENIZERS = TokenizerRegistry()

"""Offering the served models' tokenizer files to the Proxy (SPEC 16.2 (b)).

For each base model an engine serves (``served`` with no parent, SPEC 16.1)
whose ``root`` is a readable directory on this host, or a hub name present
in the Hugging Face cache, the agent offers the SHA-256 digests of the
tokenizer files there (only ``NAMES``):

1. ``POST /v1/instance/tokenizer`` ``{"instance_id", "model", "files"}``;
   the Proxy answers the digests it lacks (``missing``);
2. ``PUT /v1/instance/tokenizer/<sha256>`` with the bytes of each missing
   file, read again and checked against its digest first.

Offers go after the first register, whenever what the engines serve
changes, and after every register again (the Proxy may have forgotten
everything: a wiped database). One thread with a ``ProxyClient`` of its own;
it looks every ``LOOK_S`` and does nothing while nothing changed. A failure
is retried with backoff; ``unknown_instance`` asks the reporter to register
again (after which everything is offered anew).
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from pathlib import Path

from agent.proxy_client import OK, UNKNOWN_INSTANCE
from agent.reporter import FailureLog, SteppingThread

log = logging.getLogger(__name__)

OFFER_PATH = "/v1/instance/tokenizer"
NAMES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "chat_template.json",
         "special_tokens_map.json")
MAX_FILE_BYTES = 64 * 1024 * 1024  # the Proxy takes no larger file
LOOK_S = 5.0
UPLOAD_TIMEOUT_S = 60.0  # a 64 MiB file over a slow link; the usual file is a few MB


def hub_cache(environ) -> Path:
    """The Hugging Face hub cache: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``."""
    if environ.get("HF_HUB_CACHE"):
        return Path(environ["HF_HUB_CACHE"])
    if environ.get("HF_HOME"):
        return Path(environ["HF_HOME"]) / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


def model_directory(root, environ):
    """The directory of a served model's files: ``root`` itself when it is a directory here, else the snapshot
    the hub cache's ``refs/main`` names for the hub name ``root`` (``org/name``); None when neither is."""
    if not root:
        return None
    path = Path(root)
    if path.is_absolute() or root.startswith("."):
        return path if path.is_dir() else None
    parts = root.split("/")
    if len(parts) > 2 or any(part in ("", ".", "..") for part in parts):
        return None
    repo = hub_cache(environ) / ("models--" + "--".join(parts))
    try:
        revision = (repo / "refs" / "main").read_text().strip()
    except OSError:
        return path if path.is_dir() else None  # a relative directory the engine was started in
    snapshot = repo / "snapshots" / revision
    if not revision or "/" in revision or revision in (".", "..") or not snapshot.is_dir():
        return None
    return snapshot


def digest_of(path: Path):
    """The file's SHA-256 (hex), or None when it cannot be read or is larger than the Proxy takes."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            log.warning("tokenizer file %s is over %d bytes: not offered", path, MAX_FILE_BYTES)
            return None
        with path.open("rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError:
        return None


def tokenizer_files(directory: Path) -> dict:
    """``{name: (path, sha256)}`` of the tokenizer files present in ``directory``."""
    files = {}
    for name in NAMES:
        path = directory / name
        if path.is_file():
            digest = digest_of(path)
            if digest is not None:
                files[name] = (path, digest)
    return files


def served_bases(served_lists) -> dict:
    """``{model id: root}`` of the base models (no parent) the engines' ``served`` lists name."""
    bases = {}
    for served in served_lists:
        for entry in served or ():
            if entry.get("parent") is None and entry.get("root"):
                bases.setdefault(entry["id"], entry["root"])
    return bases


class TokenizerOfferer(SteppingThread):
    """``served()``: the engines' ``served`` lists; ``registrations()``: how many times the reporter has
    registered (0: not yet); ``instance_id()``: the id reported as now."""

    thread_name = "fleetwatch-tokenizer-offer"

    def __init__(self, client, served, registrations, instance_id, on_unknown_instance=None, environ=None,
                 clock=time.monotonic, backoff=None, failure_log=None):
        self._start_stepping(client, backoff, clock)
        self._served, self._registrations, self._instance_id = served, registrations, instance_id
        self._on_unknown_instance = on_unknown_instance
        self._environ = os.environ if environ is None else environ
        self._failures = failure_log or FailureLog(logger=log, clock=clock)
        self._offered = None  # (registrations, bases) of the last round offered in full
        self.uploads = 0

    def step(self) -> float:
        wait = self._backing_off(self._clock())
        if wait is not None:
            return wait
        registrations = self._registrations()
        if not registrations:
            return LOOK_S
        bases = served_bases(self._served())
        state = (registrations, tuple(sorted(bases.items())))
        if state == self._offered:
            return LOOK_S
        for model, root in sorted(bases.items()):
            directory = model_directory(root, self._environ)
            files = tokenizer_files(directory) if directory is not None else {}
            if files and not self._offer(model, files):
                return self._retry_later()
        self._offered = state
        self._backoff.reset()
        self._failures.success()
        return LOOK_S

    def _offer(self, model, files) -> bool:
        body = {"instance_id": self._instance_id(), "model": model,
                "files": {name: digest for name, (_, digest) in files.items()}}
        answer = self._client.post(OFFER_PATH, body)
        if answer.kind == UNKNOWN_INSTANCE:
            if self._on_unknown_instance is not None:
                self._on_unknown_instance()
            self._failures.failure(f"tokenizer of {model}: the Proxy does not know instance {body['instance_id']}; "
                                   "registering again")
            return False
        if answer.kind != OK:
            self._failures.failure(f"tokenizer offer of {model} to {self._client.base_url} failed: {answer.detail}")
            return False
        missing = answer.data.get("missing")
        by_digest = {digest: path for path, digest in files.values()}
        for digest in missing if isinstance(missing, list) else ():
            path = by_digest.get(digest)
            if path is not None and not self._upload(model, path, digest):
                return False
        return True

    def _upload(self, model, path, digest) -> bool:
        try:
            data = path.read_bytes()
        except OSError as error:
            self._failures.failure(f"tokenizer file {path} of {model}: {error}")
            return False
        if hashlib.sha256(data).hexdigest() != digest:  # changed since it was offered: offer again
            self._failures.failure(f"tokenizer file {path} of {model} changed since it was offered")
            return False
        answer = self._client.put(f"{OFFER_PATH}/{digest}", data, timeout_s=UPLOAD_TIMEOUT_S)
        if answer.kind != OK:
            self._failures.failure(f"upload of {path} to {self._client.base_url} failed: {answer.detail}")
            return False
        self.uploads += 1
        log.info("uploaded tokenizer file %s of %s (%d bytes)", path.name, model, len(data))
        return True

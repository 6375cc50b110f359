"""The agent's one HTTP client to its Proxy: JSON POSTs over one kept-alive ``http.client`` connection.

Every agent → Proxy request goes through ``ProxyClient``: register,
snapshots, heartbeats and unregister (``agent/reporter.py``), the prefix
bodies (``agent/prefix_reporter.py``) and the tokenizer offers and uploads
(``agent/tokenizer_offer.py``, the one PUT of raw bytes). Each of those threads holds a client
of its own, since one connection carries one request at a time.

Why ``http.client`` rather than ``requests``: a POST costs about 0.2 ms of
CPU here against 0.9 ms (issue 32's agent cost), and the agent installs
without ``requests`` and its four dependencies. What that means for an
operator (``docs/agent.md``, "Reporting"): HTTPS verifies against the
system's trust store (``ssl.create_default_context``; ``SSL_CERT_FILE`` and
``SSL_CERT_DIR`` apply), ``HTTP(S)_PROXY`` variables are not read, and
redirects are not followed (an answer that is not the Proxy's is a failure).

The timeout bounds each socket operation (connect, each send, each read). An
idle kept-alive connection the Proxy has closed (it drops a connection idle
for 10 s, ``docs/security.md``) is noticed before the next request is written
and replaced; one closed in the instant between that look and the request is
reopened once for the same body.
"""

from __future__ import annotations

import http.client
import json
import select
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from agent import AGENT_VERSION

OK = "ok"
UNKNOWN_INSTANCE = "unknown_instance"  # the Proxy forgot us: register again
REJECTED = "rejected"  # the Proxy answered, but no (4xx, ok: false)
UNAVAILABLE = "unavailable"  # no answer: connection error, timeout, 5xx, or not the Proxy's answer
# The Proxy's answers are a few hundred bytes; a longer one is not from a Proxy and is not read on.
MAX_ANSWER_BYTES = 64 * 1024
# Errors of a request written to a connection the Proxy had already closed.
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)


@dataclass
class Answer:
    kind: str
    data: object = None
    detail: str = ""


class ProxyClient:
    """POSTs JSON to the Proxy at ``base_url`` (its path, if any, prefixes every request's)."""

    def __init__(self, base_url, token=None, timeout_s=5.0):
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        parts = urlsplit(self.base_url)
        self._host, self._port, self._prefix = parts.hostname, parts.port, parts.path
        # Built once: loading the trust store takes milliseconds, a connection's handshake reuses it.
        self._tls = ssl.create_default_context() if parts.scheme == "https" else None
        self._headers = {"Content-Type": "application/json", "User-Agent": f"fleetwatch-agent/{AGENT_VERSION}"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._conn = None

    def post(self, path, body, timeout_s=None) -> Answer:
        """POST ``body``: an object, or JSON bytes already encoded.

        Only an answer that is a JSON object counts as the Proxy's: a 200 with
        an HTML page or a list (a wrong URL, a captive portal) is a failure, and
        at most ``MAX_ANSWER_BYTES`` of any answer are read.
        """
        data = body if isinstance(body, bytes) else json.dumps(body, separators=(",", ":")).encode()
        return self.send("POST", path, data, timeout_s=timeout_s)

    def put(self, path, data: bytes, content_type="application/octet-stream", timeout_s=None) -> Answer:
        """PUT raw bytes (a tokenizer file, SPEC 16.2); the answer is read as ``post``'s."""
        return self.send("PUT", path, data, content_type, timeout_s)

    def send(self, method, path, data: bytes, content_type="application/json", timeout_s=None) -> Answer:
        timeout_s = timeout_s or self.timeout_s
        headers = self._headers if content_type == "application/json" else {**self._headers,
                                                                             "Content-Type": content_type}
        for attempt in (1, 2):
            conn, reused = self._connection(timeout_s)
            try:
                conn.request(method, self._prefix + path, data, headers)
                response = conn.getresponse()
                raw = response.read(MAX_ANSWER_BYTES + 1)
            except (OSError, http.client.HTTPException) as error:
                self.close()
                if reused and attempt == 1 and isinstance(error, _STALE):
                    continue
                return Answer(UNAVAILABLE, detail=f"{type(error).__name__}: {error}")
            if len(raw) > MAX_ANSWER_BYTES or response.will_close or not response.isclosed():
                self.close()  # not read to its end, or the Proxy closes it: a new connection next time
            return classify(response.status, raw if len(raw) <= MAX_ANSWER_BYTES else None)
        return Answer(UNAVAILABLE, detail="connection closed")  # pragma: no cover - the loop returns

    def _connection(self, timeout_s):
        """``(connection, reused)``: the kept-alive one while the Proxy has not closed it, else a new one."""
        conn = self._conn
        if conn is not None and conn.sock is not None and not _closed_by_peer(conn.sock):
            conn.timeout = timeout_s
            conn.sock.settimeout(timeout_s)
            return conn, True
        self.close()
        if self._tls is not None:
            conn = http.client.HTTPSConnection(self._host, self._port, timeout=timeout_s, context=self._tls)
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout_s)
        self._conn = conn
        return conn, False

    def close(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _closed_by_peer(sock) -> bool:
    """An idle kept-alive socket that is readable has its end of file (or bytes no request asked for): not reusable."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


def classify(status, raw) -> Answer:
    """The ``Answer`` of an HTTP status and body (None: longer than ``MAX_ANSWER_BYTES``).

    Only an answer that is a JSON object counts as the Proxy's: a 200 with an
    HTML page or a list (a wrong URL, a captive portal) is a failure.
    """
    if raw is None:
        return Answer(UNAVAILABLE, detail=f"HTTP {status}: an answer over {MAX_ANSWER_BYTES} bytes, not the Proxy's")
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    if status >= 500:
        return Answer(UNAVAILABLE, data, f"HTTP {status}")
    if isinstance(data, dict) and data.get("ok") is False:
        if data.get("error") == UNKNOWN_INSTANCE:
            return Answer(UNKNOWN_INSTANCE, data, "unknown_instance")
        return Answer(REJECTED, data, f"HTTP {status}: {_short(data)}")
    text = raw.decode("utf-8", "replace")
    if 200 <= status < 300:
        if isinstance(data, dict):
            return Answer(OK, data)
        return Answer(UNAVAILABLE, data, f"HTTP {status} but not a JSON object, not the Proxy's: {_short(text)}")
    return Answer(REJECTED, data, f"HTTP {status}: {_short(data if data is not None else text)}")


def _short(value, limit=200):
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= limit else text[:limit] + "..."

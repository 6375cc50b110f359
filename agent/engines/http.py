"""``GET URL/metrics`` from a serving engine: one kept-alive HTTP/1.1 connection, one deadline.

A small client of its own rather than ``http.client`` or ``requests``: at
four scrapes a second the standard library's header parsing (through the
``email`` package) cost ~0.5 ms of CPU per scrape, as much as reading the
metrics themselves (``bench/README.md``, "Engine scraping"). This one
writes a request prepared once, reads the status line, the two headers
that frame the body (``Content-Length``, ``Transfer-Encoding: chunked``)
and ``Connection``, and the body; every socket read gets what is left of the
scrape's one deadline, so an engine that dribbles its answer cannot stretch
the scrape past the timeout.
"""

from __future__ import annotations

import socket
import ssl
import time
from urllib.parse import urlsplit

from agent.engines.figures import BAD_FORMAT, HTTP_ERROR, OK, TIMEOUT, UNREACHABLE

MAX_BODY_BYTES = 8 * 1024 * 1024  # a vLLM /metrics is ~50 KB; LoRA-heavy ones a few hundred
MAX_HEAD_BYTES = 64 * 1024
READ_SIZE = 256 * 1024


class _Deadline(Exception):
    pass


class _Closed(ConnectionError):
    """The engine closed the connection before its answer was complete."""


class _NotHttp(Exception):
    pass


class _HttpStatus(Exception):
    pass


class _TooLarge(Exception):
    pass


def _describe(error):
    text = str(error) or type(error).__name__
    return text if type(error).__name__ in text else f"{type(error).__name__}: {text}"


class MetricsFetcher:
    """One engine's ``/metrics`` (or another ``path``: ``/v1/models``) over one kept-alive connection.
    Not thread-safe: one worker uses it."""

    def __init__(self, url, timeout_s, clock_s=time.monotonic, path="/metrics", accept="text/plain; version=0.0.4"):
        parts = urlsplit(url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        host_header = parts.netloc.rpartition("@")[2]
        path = parts.path.rstrip("/") + path
        self._request = (f"GET {path} HTTP/1.1\r\nHost: {host_header}\r\nAccept: {accept}\r\n"
                         "Accept-Encoding: identity\r\nUser-Agent: fleetwatch-agent\r\n\r\n").encode("ascii")
        self._timeout_s = timeout_s
        self._clock_s = clock_s
        self._sock = None
        self._buffer = bytearray()

    def fetch(self):
        """``(status, error, text)``; ``text`` is the body when the status is ``ok``. Never raises."""
        deadline = self._clock_s() + self._timeout_s
        reused = self._sock is not None
        answer = self._attempt(deadline)
        if answer[0] == UNREACHABLE and reused:
            # Most likely a kept-alive connection the engine closed while
            # idle, not an engine that went away: one fresh try.
            answer = self._attempt(deadline)
        return answer

    def close(self):
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = None
        self._buffer.clear()

    def _attempt(self, deadline):
        try:
            return OK, None, self._get(deadline)
        except (TimeoutError, _Deadline):
            error = TIMEOUT, f"no answer within {self._timeout_s * 1000:.0f} ms"
        except _HttpStatus as status:
            error = HTTP_ERROR, str(status)
        except _NotHttp as failure:
            error = HTTP_ERROR, f"not an HTTP answer: {failure}"
        except _TooLarge as failure:
            error = BAD_FORMAT, str(failure)
        except _Closed as failure:
            error = UNREACHABLE, str(failure)
        except OSError as failure:  # refused, reset, closed, no route, name not known, TLS
            error = UNREACHABLE, _describe(failure)
        self.close()
        return error[0], error[1], None

    # --- the exchange -------------------------------------------------------------

    def _remaining(self, deadline):
        left = deadline - self._clock_s()
        if left <= 0:
            raise _Deadline()
        return left

    def _connect(self, deadline):
        if self._sock is None:
            sock = socket.create_connection((self._host, self._port), timeout=self._remaining(deadline))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._https:
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self._host)
            self._sock = sock
        return self._sock

    def _fill(self, deadline):
        self._sock.settimeout(self._remaining(deadline))
        data = self._sock.recv(READ_SIZE)
        if not data:
            raise _Closed("the engine closed the connection")
        self._buffer += data

    def _get(self, deadline):
        sock = self._connect(deadline)
        sock.settimeout(self._remaining(deadline))
        sock.sendall(self._request)
        version, status, reason, headers = self._read_head(deadline)
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = self._read_chunked(deadline)
        elif "content-length" in headers:
            body = self._read_length(headers["content-length"], deadline)
        else:
            body = self._read_to_close(deadline)
        connection = headers.get("connection", "").lower()
        if connection == "close" or (version == "HTTP/1.0" and connection != "keep-alive"):
            self.close()
        if status != 200:
            raise _HttpStatus(f"HTTP {status} {reason}".strip())
        return body.decode("utf-8", errors="replace")

    def _read_head(self, deadline):
        while True:
            end = self._buffer.find(b"\r\n\r\n")
            if end != -1:
                break
            if len(self._buffer) > MAX_HEAD_BYTES:
                raise _NotHttp("no end of headers")
            self._fill(deadline)
        head = bytes(self._buffer[:end]).decode("latin-1")
        del self._buffer[:end + 4]
        status_line, *lines = head.split("\r\n")
        version, _, rest = status_line.partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/") or not code.isdigit():
            raise _NotHttp(repr(status_line[:60]))
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return version, int(code), reason, headers

    def _read_length(self, text, deadline):
        if not text.isdigit():
            raise _NotHttp(f"Content-Length {text!r}")
        length = int(text)
        if length > MAX_BODY_BYTES:
            raise _TooLarge(f"answer larger than {MAX_BODY_BYTES // (1024 * 1024)} MiB")
        while len(self._buffer) < length:
            self._fill(deadline)
        body = bytes(self._buffer[:length])
        del self._buffer[:length]
        return body

    def _read_line(self, deadline):
        while True:
            end = self._buffer.find(b"\r\n")
            if end != -1:
                line = bytes(self._buffer[:end])
                del self._buffer[:end + 2]
                return line
            if len(self._buffer) > MAX_HEAD_BYTES:
                raise _NotHttp("chunk line too long")
            self._fill(deadline)

    def _read_chunked(self, deadline):
        parts, size = [], 0
        while True:
            line = self._read_line(deadline)
            try:
                chunk = int(line.split(b";")[0].strip(), 16)
            except ValueError:
                raise _NotHttp(f"chunk size {line[:20]!r}") from None
            if chunk == 0:
                while self._read_line(deadline):  # trailers, up to the empty line
                    pass
                return b"".join(parts)
            size += chunk
            if size > MAX_BODY_BYTES:
                raise _TooLarge(f"answer larger than {MAX_BODY_BYTES // (1024 * 1024)} MiB")
            parts.append(self._read_length(str(chunk), deadline))
            if self._read_line(deadline):
                raise _NotHttp("no line end after a chunk")

    def _read_to_close(self, deadline):
        # No framing: the body runs to the end of the connection, which is then spent.
        while True:
            if len(self._buffer) > MAX_BODY_BYTES:
                raise _TooLarge(f"answer larger than {MAX_BODY_BYTES // (1024 * 1024)} MiB")
            try:
                self._fill(deadline)
            except _Closed:
                break
        body = bytes(self._buffer)
        self.close()
        return body

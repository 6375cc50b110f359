"""The agent's HTTP endpoints (SPEC 2.1), on the standard library's threaded server.

Bounded on purpose: at most ``max_connections`` handler threads exist at once
(one more connection is answered 503 and closed at once), and an idle or
slow client is dropped after ``CLIENT_TIMEOUT_S``. Answers come from the
snapshot store in memory; nothing here samples.
"""

from __future__ import annotations

import json
import logging
import socket
import socketserver
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from agent import AGENT_VERSION

log = logging.getLogger(__name__)

CLIENT_TIMEOUT_S = 10
HEALTHZ = "/healthz"
SNAPSHOT = "/v1/resource/snapshot"
KNOWN_PATHS = {HEALTHZ, SNAPSHOT}
BUSY_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: 30\r\n"
    b"Connection: close\r\n\r\n" + b'{"ok": false, "error": "busy"}'
)


def _json(payload) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


class AgentRequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = f"fleetwatch-agent/{AGENT_VERSION}"
    sys_version = ""
    timeout = CLIENT_TIMEOUT_S
    # Headers and body go out in separate writes; with Nagle on, a kept-alive
    # client would wait for a delayed ACK (about 40 ms) on every response.
    disable_nagle_algorithm = True

    def __getattr__(self, name):
        # BaseHTTPRequestHandler looks up do_<METHOD> and answers 501 when it
        # is missing; every method must reach routing so known paths give 405.
        if name.startswith("do_"):
            return self._route
        raise AttributeError(name)

    def _route(self):
        path = urlsplit(self.path).path
        if path not in KNOWN_PATHS:
            self._send(404, _json({"ok": False, "error": "not_found"}))
        elif self.command != "GET":
            self._send(405, _json({"ok": False, "error": "method_not_allowed"}), {"Allow": "GET"})
        elif path == HEALTHZ:
            self._send(200, _json({"ok": True, "agent_version": AGENT_VERSION,
                                   "instance_id": self.server.instance_id()}))
        else:
            body = self.server.store.latest_body()
            if body is None:
                self._send(503, _json({"ok": False, "error": "no_sample_yet"}), {"Retry-After": "1"})
            else:
                self._send(200, body)

    def _send(self, status, body, headers=None):
        # A request body is never read; closing after one keeps its bytes
        # from being parsed as the next request on a kept-alive connection.
        has_body = self.headers.get("Content-Length") not in (None, "0") or "Transfer-Encoding" in self.headers
        if self.command != "GET" or has_body:
            self.close_connection = True
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        log.debug("%s %s", self.address_string(), format % args)


class AgentHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64
    # Python's default (True) would keep a list of every handler thread ever
    # started until shutdown; the semaphore already bounds them.
    block_on_close = False

    def __init__(self, address, store, instance_id, max_connections=16):
        """``instance_id`` is a callable: the id can change after registering."""
        self.store = store
        self.instance_id = instance_id
        self._slots = threading.BoundedSemaphore(max_connections)
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, AgentRequestHandler)

    def server_bind(self):
        # HTTPServer.server_bind resolves its own FQDN, a DNS lookup that can
        # hang for seconds on a host with broken resolvers; the name is unused.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def process_request(self, request, client_address):
        if not self._slots.acquire(blocking=False):
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _refuse(self, request):
        try:
            request.settimeout(1)
            request.sendall(BUSY_RESPONSE)
        except OSError:
            pass
        self.shutdown_request(request)


class AgentServer:
    """Runs ``AgentHTTPServer`` on a background thread."""

    def __init__(self, host, port, store, instance_id, max_connections=16, poll_interval_s=60.0):
        self.httpd = AgentHTTPServer((host, port), store, instance_id, max_connections)
        # The serving loop only wakes to look for a shutdown request; stop()
        # wakes it with a connection instead, so an idle agent stays asleep.
        self._poll_interval_s = poll_interval_s
        self._thread = None

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    def start(self):
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": self._poll_interval_s},
                                        name="fleetwatch-http", daemon=True)
        self._thread.start()

    def stop(self):
        if self._thread is not None:
            stopper = threading.Thread(target=self.httpd.shutdown, daemon=True)
            stopper.start()
            # Until the loop has seen the request, each connection makes its
            # select() return; one that lands before the flag is just served.
            while stopper.is_alive():
                self._wake()
                stopper.join(0.05)
            self._thread.join(5)
        self.httpd.server_close()

    def _wake(self):
        host, port = self.httpd.server_address[:2]
        if host in ("0.0.0.0", "::", ""):
            host = "::1" if self.httpd.address_family == socket.AF_INET6 else "127.0.0.1"
        try:
            with socket.create_connection((host, port), timeout=1):
                pass
        except OSError:
            pass

"""Actors for the agent tests: a hand-moved clock, psutil-like counters, a fake Proxy, a fake engine.

Nothing here sleeps through time the code under test would wait: clocks are
injected and moved by the test. The fake Proxy and the fake engine are real
HTTP servers on 127.0.0.1, so the agent's own HTTP code paths are exercised.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections import Counter, namedtuple
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.agent.fake_pynvml import GIB, FakeGpu, FakeNvml
from tests.fake_http import FakeHandler

CpuTimes = namedtuple("scputimes", "user nice system idle iowait irq softirq steal guest guest_nice")
VirtualMemory = namedtuple("svmem", "total available percent used free")
SwapMemory = namedtuple("sswap", "total used free percent sin sout")
NetIO = namedtuple("snetio", "bytes_sent bytes_recv packets_sent packets_recv errin errout dropin dropout")
IfStats = namedtuple("snicstats", "isup duplex speed mtu flags")
DiskUsage = namedtuple("sdiskusage", "total used free percent")


def cpu_times(busy=0.0, idle=0.0, iowait=0.0, guest=0.0):
    """One core's cumulative seconds; ``busy`` goes to user (guest is counted inside user, as on Linux)."""
    return CpuTimes(user=busy + guest, nice=0.0, system=0.0, idle=idle, iowait=iowait, irq=0.0, softirq=0.0,
                    steal=0.0, guest=guest, guest_nice=0.0)


def net_io(rx=0, tx=0):
    return NetIO(bytes_sent=tx, bytes_recv=rx, packets_sent=0, packets_recv=0, errin=0, errout=0, dropin=0,
                 dropout=0)


class FakeClock:
    """Milliseconds (``ms()``) and seconds (``s()``) that move only when told."""

    def __init__(self, start_ms=1_000_000):
        self.now_ms = start_ms

    def ms(self):
        return self.now_ms

    def s(self):
        return self.now_ms / 1000.0

    def advance(self, ms):
        self.now_ms += ms


class FakeSource:
    """The counter source ``HostSampler`` reads, with values set by the test."""

    def __init__(self):
        self.cores = [cpu_times(idle=100.0), cpu_times(idle=100.0)]
        self.counts = (2, 1)
        self.load = (0.5, 0.25, 0.125)
        self.memory = VirtualMemory(total=16 * GIB, available=12 * GIB, percent=25.0, used=3 * GIB, free=1 * GIB)
        self.swap = SwapMemory(total=2 * GIB, used=GIB // 2, free=GIB + GIB // 2, percent=25.0, sin=0, sout=0)
        self.net = {"lo": net_io(), "eth0": net_io(), "ib0": net_io()}
        self.if_stats = {
            "lo": IfStats(True, 0, 0, 65536, "up,loopback,running"),
            "eth0": IfStats(True, 2, 25000, 1500, "up,broadcast,running,multicast"),
            "ib0": IfStats(True, 2, 0, 4092, "up,broadcast,running,multicast"),
        }
        self.default_iface = "ib0"
        self.disks = {"/": DiskUsage(total=500 * GIB, used=125 * GIB, free=375 * GIB, percent=25.0)}
        self.calls = Counter()

    def add_cpu(self, busy, idle):
        """Every core spends ``busy`` and ``idle`` more seconds."""
        self.cores = [cpu_times(busy=c.user + busy, idle=c.idle + idle) for c in self.cores]

    def add_net(self, iface, rx, tx):
        io = self.net[iface]
        self.net[iface] = net_io(rx=io.bytes_recv + rx, tx=io.bytes_sent + tx)

    def cpu_times_per_core(self):
        return list(self.cores)

    def cpu_counts(self):
        return self.counts

    def load_average(self):
        return self.load

    def virtual_memory(self):
        return self.memory

    def swap_memory(self):
        return self.swap

    def net_io_counters(self):
        return dict(self.net)

    def net_if_stats(self):
        self.calls["net_if_stats"] += 1
        return dict(self.if_stats)

    def default_route_interface(self):
        self.calls["default_route_interface"] += 1
        return self.default_iface

    def disk_usage(self, path):
        if path not in self.disks:
            raise FileNotFoundError(path)
        return self.disks[path]


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def source():
    return FakeSource()


@pytest.fixture
def two_gpus():
    return FakeNvml([
        FakeGpu(uuid="GPU-aaaa", utilization=40, memory_used=20 * GIB),
        FakeGpu(uuid="GPU-bbbb", utilization=80, memory_used=70 * GIB),
    ])


# --- fake Proxy -------------------------------------------------------------------

def serve_on_loopback(handler):
    """A threaded HTTP server on a free 127.0.0.1 port, serving on a daemon thread: ``(server, url)``."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


class FakeProxy:
    """A minimal Proxy speaking SPEC 3's instance endpoints, recording every request.

    ``status`` forces every answer to that HTTP status (503: "down");
    ``forget()`` drops every registration, as a Proxy with a wiped database;
    ``close_idle()`` closes every open connection, as a Proxy does with one
    left idle too long; ``hang_up_next`` requests are read and answered by
    closing the connection.
    """

    def __init__(self):
        self.requests = []
        self.known = set()
        self.status = None
        self.heartbeat_interval_s = 3
        self.assign_id = None  # answer register with this id instead of the one sent
        self.raw_answer = None  # (content type, bytes): answer every request 200 with these instead
        self.raw_sent = 0  # bytes of raw answers written before the client stopped reading
        # SPEC 15.3's prefix index: (instance, engine) -> {"epoch", "seq", "keys"}; resync_next forces one resync.
        self.block_tokens = 16
        self.prefix = {}
        self.resync_next = False
        # SPEC 16.2's tokenizer files: digest -> bytes uploaded (checked against the digest), and the offers.
        self.tokenizer_files = {}
        self.connections = 0  # connections accepted so far
        self.hang_up_next = 0
        self._open = set()
        self._changed = threading.Condition()
        proxy = self

        class Handler(FakeHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else headers and body wait on a delayed ACK (40 ms)

            def setup(self):
                super().setup()
                with proxy._changed:
                    proxy.connections += 1
                    proxy._open.add(self.connection)

            def finish(self):
                with proxy._changed:
                    proxy._open.discard(self.connection)
                super().finish()

            def do_POST(self):  # noqa: N802 - stdlib name
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"null")
                with proxy._changed:
                    if proxy.hang_up_next:
                        proxy.hang_up_next -= 1
                        proxy.requests.append((self.path, body, dict(self.headers)))
                        self.close_connection = True
                        return
                status, answer = proxy._answer(self.path, body, dict(self.headers))
                if proxy.raw_answer is not None:
                    return self.send_raw(*proxy.raw_answer)
                self.answer(json.dumps(answer).encode(), status=status)

            def do_PUT(self):  # noqa: N802 - stdlib name
                length = int(self.headers.get("Content-Length", 0))
                data = self.rfile.read(length)
                digest = self.path.rsplit("/", 1)[1]
                with proxy._changed:
                    proxy.requests.append((self.path, {"bytes": len(data)}, dict(self.headers)))
                    ok = (self.headers.get("Content-Type") == "application/octet-stream"
                          and hashlib.sha256(data).hexdigest() == digest)
                    if ok:
                        proxy.tokenizer_files[digest] = data
                    proxy._changed.notify_all()
                self.answer(json.dumps({"ok": True} if ok else {"ok": False, "error": "validation_error"}).encode(),
                            status=200 if ok else 400)

            def send_raw(self, content_type, data):
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    for start in range(0, len(data), 65536):
                        self.wfile.write(data[start:start + 65536])
                        proxy.raw_sent = start + 65536
                except OSError:
                    self.close_connection = True  # the client stopped reading

        self.httpd, self.url = serve_on_loopback(Handler)

    def _answer(self, path, body, headers):
        with self._changed:
            self.requests.append((path, body, headers))
            self._changed.notify_all()
            if self.status is not None:
                return self.status, {"ok": False, "error": "forced"}
            instance_id = body.get("instance_id") if isinstance(body, dict) else None
            if path == "/v1/instance/register":
                instance_id = self.assign_id or instance_id or f"hp_{body['host']}:{body['port']}"
                self.known.add(instance_id)
                return 200, {"instance_id": instance_id, "heartbeat_interval_s": self.heartbeat_interval_s,
                             "ttl_s": 30}
            if path in ("/v1/instance/heartbeat", "/v1/instance/resource_snapshot"):
                if instance_id in self.known:
                    return 200, {"ok": True}
                return 200, {"ok": False, "error": "unknown_instance"}
            if path == "/v1/instance/prefix_blocks":
                return self._prefix_blocks(instance_id, body)
            if path == "/v1/instance/tokenizer":
                if instance_id not in self.known:
                    return 200, {"ok": False, "error": "unknown_instance"}
                missing = sorted(set(body["files"].values()) - self.tokenizer_files.keys())
                return 200, {"ok": True, "missing": missing}
            if path == "/v1/instance/unregister":
                known = instance_id in self.known
                self.known.discard(instance_id)
                return 200, {"ok": known}
            return 404, {"ok": False, "error": "not_found"}

    def _prefix_blocks(self, instance_id, body):
        if instance_id not in self.known:
            return 200, {"ok": False, "error": "unknown_instance"}
        if body["block_tokens"] != self.block_tokens:
            return 400, {"ok": False, "error": "bad_request",
                         "detail": f"block_tokens must be {self.block_tokens}"}
        state = self.prefix.get((instance_id, body["engine"]))
        if body["reset"]:
            state = self.prefix[(instance_id, body["engine"])] = {"epoch": body["epoch"], "seq": body["seq"],
                                                                 "keys": set(body["added"])}
            return 200, {"ok": True, "resync": False}
        if (self.resync_next or state is None or state["epoch"] != body["epoch"]
                or body["seq"] != state["seq"] + 1):
            self.resync_next = False
            return 200, {"ok": True, "resync": True}
        state["seq"] = body["seq"]
        state["keys"] = (state["keys"] - set(body["removed"])) | set(body["added"])
        return 200, {"ok": True, "resync": False}

    def prefix_keys(self, instance_id, engine):
        with self._changed:
            state = self.prefix.get((instance_id, engine))
            return set() if state is None else set(state["keys"])

    def forget(self):
        with self._changed:
            self.known.clear()
            self.tokenizer_files.clear()

    def close_idle(self):
        """Close every open connection from this end (the handlers' threads then end)."""
        with self._changed:
            for sock in self._open:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:  # its handler was closing it already
                    pass

    def bodies(self, path):
        with self._changed:
            return [body for p, body, _ in self.requests if p == path]

    def wait_for(self, predicate, timeout_s=10.0):
        """Wait (real time, for subprocess tests) until ``predicate(self)`` holds."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
            return True

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake_proxy():
    proxy = FakeProxy()
    yield proxy
    proxy.close()


# --- fake serving engine -------------------------------------------------------------

class FakeEngine:
    """A serving engine's ``/metrics`` on 127.0.0.1, or one of the ways an engine fails.

    ``mode``: ``"serve"`` answers ``body`` (a real capture); ``"hang"`` accepts
    the request and never answers until ``close()``; ``"error"`` answers 500;
    ``"garbage"`` answers 200 with an HTML page. ``models``: what ``GET /v1/models``
    lists (SPEC 16.1; vLLM's ``data``), None for a 404; those reads are counted in
    ``models_requests``, not in ``requests``.
    """

    def __init__(self, body=""):
        self.body = body
        self.models = None
        self.models_requests = 0
        self.mode = "serve"
        self.drop_idle = False  # close each connection after its answer, unannounced (an idle timeout)
        self.requests = 0
        self.connections = 0
        self._release = threading.Event()
        engine = self

        class Handler(FakeHandler):
            protocol_version = "HTTP/1.1"  # kept-alive, as uvicorn serves vLLM
            disable_nagle_algorithm = True

            def setup(self):
                engine.connections += 1
                super().setup()

            def do_GET(self):  # noqa: N802 - stdlib name
                if self.path == "/v1/models":
                    engine.models_requests += 1
                    if engine.models is None:
                        return self.answer(b'{"detail":"Not Found"}', status=404)
                    return self.answer(json.dumps({"object": "list", "data": engine.models}).encode())
                engine.requests += 1
                if self.path != "/metrics":
                    return self.answer(b"not found", "text/plain", 404)
                if engine.mode == "hang":
                    engine._release.wait(60)
                    self.close_connection = True
                    return None
                if engine.mode == "error":
                    return self.answer(b"Internal Server Error", "text/plain", 500)
                if engine.mode == "garbage":
                    return self.answer(b"<html><body>It works!</body></html>", "text/html")
                self.answer(engine.body.encode(), "text/plain; version=0.0.4; charset=utf-8")
                self.close_connection = engine.drop_idle
                return None

        self.httpd, self.url = serve_on_loopback(Handler)

    def close(self):
        self._release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


ENGINE_CAPTURES = Path(__file__).parent / "data" / "engines"


@pytest.fixture
def busy_vllm():
    engine = FakeEngine((ENGINE_CAPTURES / "vllm-0.32.0-cpu-busy.prom").read_text())
    yield engine
    engine.close()

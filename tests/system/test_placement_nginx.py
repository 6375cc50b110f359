"""nginx routing by Fleetwatch's placement (issue 19): Debian's nginx running deploy/nginx/placement-router.conf
as documented, in front of two serving backends (tiny HTTP servers that say who they are), a real Proxy.

Requests land where placement says (the less pressed backend); a backend that stops answering gets its
errors posted as feedback by nginx, is fenced after three and gets nothing more, even once it answers again;
a shed pool is a 429 for the client, a model nobody serves a 503, a Proxy that cannot be asked a 502.
"""

import json
import socket
import subprocess
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from tests.factories import make_engine, make_snapshot
from tests.fake_http import FakeHandler
from tests.live import ROOT, ChildProcess, free_port

pytestmark = pytest.mark.live

CONFIG = ROOT / "deploy" / "nginx" / "placement-router.conf"
ENV = {
    # Every request needs its token, as on a fresh install: nginx sends its route token.
    "FLEETWATCH_TRUSTED_NETWORKS": "",
    "FLEETWATCH_INSTANCE_TTL_S": "3600",
    "FLEETWATCH_FENCE_RECOVERY_S": "3600",
    # Each placement reads the rows as they are: what the test reported is what every web process ranks on.
    "FLEETWATCH_PLACEMENT_REFRESH_S": "0",
}


class Backend:
    """A serving engine's stand-in on 127.0.0.1: answers every request with its name, counts them."""

    def __init__(self, name, port=None):
        self.name, self.hits = name, 0
        backend = self

        class Handler(FakeHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                backend.hits += 1
                self.answer(json.dumps({"backend": backend.name}).encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", port or 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class PlacementRouter(ChildProcess):
    """nginx with the documented configuration, its three marked values set for this test."""

    kind = "nginx"

    def __init__(self, tmp_path, proxy_port, token):
        self.port = free_port()
        self.prefix = Path(tmp_path) / f"nginx-{self.port}"
        (self.prefix / "logs").mkdir(parents=True, exist_ok=True)
        self.log_path = self.prefix / "logs" / "error.log"
        site = CONFIG.read_text()
        for marked, value, times in [
            ("server 127.0.0.1:8001;", f"server 127.0.0.1:{proxy_port};", 1),
            ("listen 8080;", f"listen 127.0.0.1:{self.port};", 1),
            ("SET-A-ROUTE-TOKEN", token, 2),
        ]:
            assert site.count(marked) == times, marked
            site = site.replace(marked, value)
        (self.prefix / "fleetwatch-router.conf").write_text(site)
        (self.prefix / "nginx.conf").write_text(f"""
worker_processes 1;
error_log {self.log_path} info;
pid {self.prefix}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
    access_log {self.prefix}/logs/access.log;
    client_body_temp_path {self.prefix}/body;
    proxy_temp_path {self.prefix}/proxy;
    fastcgi_temp_path {self.prefix}/fastcgi;
    uwsgi_temp_path {self.prefix}/uwsgi;
    scgi_temp_path {self.prefix}/scgi;
    include {self.prefix}/fleetwatch-router.conf;
}}
""")

    def argv(self):
        return ["nginx", "-p", str(self.prefix), "-c", str(self.prefix / "nginx.conf"), "-g", "daemon off;"]

    def _ready(self):
        if self.process.poll() is not None:
            raise AssertionError(f"nginx exited with {self.process.returncode}; log:\n{self.log()}")
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def complete(self, **headers):
        return requests.post(self.url + "/v1/completions", json={"prompt": "hi", "max_tokens": 4}, headers=headers,
                             timeout=10)


def create_token(server, scope):
    result = subprocess.run([sys.executable, str(ROOT / "manage.py"), "create_token", "--scope", scope,
                             "--name", f"test-{scope}"], cwd=ROOT, env=server.env(), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()[-1]


def served_by(response):
    assert response.status_code == 200, (response.status_code, response.text)
    return response.json()["backend"]


def test_it_sends_each_request_where_placement_says_and_fences_a_failing_backend(servers, tmp_path):
    route_port = free_port()  # nginx asks the Proxy's route listener, as the configuration says
    server = servers(roles="proxy", env={**ENV, "FLEETWATCH_ROUTE_PORT": str(route_port)}).start()
    agent = {"Authorization": f"Bearer {create_token(server, 'instance')}"}
    reader = {"Authorization": f"Bearer {create_token(server, 'read')}"}
    router = PlacementRouter(tmp_path, route_port, create_token(server, "route"))
    left, right = Backend("left"), Backend("right")
    try:
        router.start()

        def report(backend, waiting):
            now_ms = int(time.time() * 1000)
            snapshot = make_snapshot(timestamp_ms=now_ms, engines=[
                make_engine(requests_waiting=waiting, kv_cache_usage_ratio=0.1, scraped_at_ms=now_ms)])
            response = requests.post(server.url + "/v1/instance/resource_snapshot", headers=agent, timeout=10,
                                     json={"instance_id": backend.name, "snapshot": snapshot})
            assert response.json() == {"ok": True}

        for backend in (left, right):
            response = requests.post(server.url + "/v1/instance/register", headers=agent, timeout=10, json={
                "instance_id": backend.name, "host": "127.0.0.1", "port": backend.port})
            assert response.status_code == 200, response.text
        # Pressure 0 against 1 (5 waiting of W = 5): the left one, while the requests placed there (each
        # pending, 0.2, until its next report) keep it below the right one.
        report(left, 0)
        report(right, 5)
        assert [served_by(router.complete(**{"X-Model": "tiny"})) for _ in range(4)] == ["left"] * 4
        assert (left.hits, right.hits) == (4, 0)

        # The left one stops: nginx answers 502 and posts each failure; the third fences it.
        report(left, 0)
        report(right, 5)
        left.stop()
        failures = [router.complete().status_code for _ in range(3)]
        assert failures == [502, 502, 502], router.log()
        fenced = {row["instance_id"]: row for row in requests.get(server.url + "/v1/instance/list", headers=reader,
                                                                   timeout=10).json()}["left"]
        assert (fenced["fenced"], fenced["fence_reason"]) == (True, "router_refused")
        # Back and idle, it still gets nothing while fenced.
        left = Backend("left", port=left.port)
        report(left, 0)
        report(right, 5)
        assert [served_by(router.complete()) for _ in range(4)] == ["right"] * 4
        assert left.hits == 0

        # Every eligible instance over the shed pressure: 429 with Retry-After; a model nobody serves: 503.
        report(right, 40)
        shed = router.complete()
        assert (shed.status_code, shed.headers["Retry-After"], shed.json()) == (429, "1", {"ok": False, "error": "shed"})
        unavailable = router.complete(**{"X-Model": "other"})
        assert (unavailable.status_code, unavailable.json()["error"]) == (503, "unavailable")
        # A session key the Proxy refuses (over 256 characters) is the client's 400.
        assert router.complete(**{"X-Session-Key": "k" * 300}).status_code == 400
        assert (left.hits, right.hits) == (0, 4)

        # The Proxy gone: nginx cannot ask, and says so.
        server.stop()
        failed = router.complete()
        assert (failed.status_code, failed.json()["error"]) == (502, "placement_failed")
    finally:
        router.stop()
        left.stop()
        right.stop()

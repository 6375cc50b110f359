"""The agent's HTTP endpoints on a real loopback socket (SPEC 2.1)."""

import http.client
import json
import socket
import threading

import pytest

from agent import AGENT_VERSION
from agent.server import AgentServer
from agent.snapshot import SnapshotStore
from tests.live import wait_for


@pytest.fixture
def store():
    return SnapshotStore()


@pytest.fixture
def server(store):
    server = AgentServer("127.0.0.1", 0, store, lambda: "i-7", max_connections=2)
    server.start()
    yield server
    server.stop()


def request(server, method, path, body=None):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        connection.request(method, path, body=body)
        response = connection.getresponse()
        raw = response.read()
        return response.status, dict(response.getheaders()), raw
    finally:
        connection.close()


def test_it_answers_healthz(server):
    status, headers, body = request(server, "GET", "/healthz")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert json.loads(body) == {"ok": True, "agent_version": AGENT_VERSION, "instance_id": "i-7"}


def test_it_answers_503_before_the_first_sample_never_an_empty_body(server):
    status, _, body = request(server, "GET", "/v1/resource/snapshot")
    assert status == 503
    assert json.loads(body) == {"ok": False, "error": "no_sample_yet"}


def test_it_serves_the_latest_sample_and_allows_a_query_string(server, store):
    store.put({"schema_version": "resource_snapshot_v1", "timestamp_ms": 1})
    store.put({"schema_version": "resource_snapshot_v1", "timestamp_ms": 2})
    status, headers, body = request(server, "GET", "/v1/resource/snapshot?fresh=1&x=y")
    assert status == 200 and headers["Cache-Control"] == "no-store"
    assert json.loads(body) == {"schema_version": "resource_snapshot_v1", "timestamp_ms": 2}


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "BREW"])
@pytest.mark.parametrize("path", ["/healthz", "/v1/resource/snapshot", "/v1/resource/snapshot?a=b"])
def test_it_answers_405_to_other_methods_on_known_paths(server, method, path):
    status, headers, body = request(server, method, path, body=b'{"x": 1}' if method != "BREW" else None)
    assert status == 405 and headers["Allow"] == "GET"
    assert json.loads(body)["ok"] is False


def test_it_answers_head_with_405_without_a_body(server):
    status, headers, body = request(server, "HEAD", "/healthz")
    assert status == 405 and body == b""


@pytest.mark.parametrize("method, path", [("GET", "/"), ("GET", "/v1/resource"), ("POST", "/nope"),
                                          ("GET", "/healthz/extra")])
def test_it_answers_404_to_anything_else(server, method, path):
    status, _, body = request(server, method, path)
    assert status == 404
    assert json.loads(body) == {"ok": False, "error": "not_found"}


def test_it_serves_several_requests_on_one_kept_alive_connection(server, store):
    store.put({"n": 1})
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    for _ in range(3):
        connection.request("GET", "/v1/resource/snapshot")
        response = connection.getresponse()
        assert response.status == 200 and json.loads(response.read()) == {"n": 1}
    connection.close()


def test_it_refuses_connections_beyond_the_limit_with_503(server):
    # Two idle clients hold both handler threads (max_connections=2) ...
    holders = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(2)]
    try:
        for holder in holders:  # ... each seen by the server before the next one connects
            holder.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert b"200 OK" in holder.recv(4096)
        status, _, body = request(server, "GET", "/healthz")
        assert status == 503 and json.loads(body) == {"ok": False, "error": "busy"}
    finally:
        for holder in holders:
            holder.close()
    # Once they leave, the slots are free again (as soon as their handler
    # threads have seen the close, which takes a moment on a busy machine).
    wait_for(lambda: request(server, "GET", "/healthz")[0] == 200, timeout_s=30, interval_s=0.05,
             message="a free slot after the holders left")


def test_it_stops_without_waiting_for_the_idle_poll(store):
    # The serving loop sleeps up to a minute between shutdown checks; stop()
    # must wake it rather than wait.
    server = AgentServer("127.0.0.1", 0, store, lambda: "i-7", poll_interval_s=600)
    server.start()
    stopper = threading.Thread(target=server.stop)
    stopper.start()
    stopper.join(120)  # far less than the 600 s poll it must not wait for
    assert not stopper.is_alive()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=1)

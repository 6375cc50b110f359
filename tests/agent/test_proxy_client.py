"""The agent's one HTTP client to its Proxy: answers, bounds, timeouts, kept-alive connections, TLS.

The Proxy is ``FakeProxy``, a real HTTP server on loopback (and, for TLS, a
real HTTPS server with a certificate made here by ``openssl``).
"""

import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
from http.server import ThreadingHTTPServer

import pytest

from agent.proxy_client import MAX_ANSWER_BYTES, OK, REJECTED, UNAVAILABLE, UNKNOWN_INSTANCE, ProxyClient
from tests.fake_http import FakeHandler
from tests.live import free_port

SNAPSHOT, HEARTBEAT = "/v1/instance/resource_snapshot", "/v1/instance/heartbeat"


@pytest.fixture
def registered(fake_proxy):
    fake_proxy.known.add("gpu-1")
    return fake_proxy


def test_it_posts_json_with_its_headers_and_reads_the_answer(registered):
    client = ProxyClient(registered.url + "/", "s3cret", 2.0)
    answer = client.post(HEARTBEAT, {"instance_id": "gpu-1"})
    assert (answer.kind, answer.data) == (OK, {"ok": True})
    path, body, headers = registered.requests[-1]
    assert (path, body) == (HEARTBEAT, {"instance_id": "gpu-1"})
    assert headers["Authorization"] == "Bearer s3cret" and headers["Content-Type"] == "application/json"
    assert headers["User-Agent"].startswith("fleetwatch-agent/")


def test_it_sends_bytes_as_they_are(registered):
    assert ProxyClient(registered.url).post(HEARTBEAT, b'{"instance_id":"gpu-1"}').kind == OK
    assert registered.bodies(HEARTBEAT) == [{"instance_id": "gpu-1"}]


def test_it_sends_no_authorization_header_without_a_token(registered):
    ProxyClient(registered.url).post(HEARTBEAT, {"instance_id": "gpu-1"})
    assert "Authorization" not in registered.requests[-1][2]


def test_it_puts_the_urls_path_before_every_request_path(fake_proxy):
    ProxyClient(fake_proxy.url + "/pool-a/").post(HEARTBEAT, {})
    assert fake_proxy.requests[-1][0] == "/pool-a" + HEARTBEAT


def test_it_tells_the_proxys_answers_apart(registered):
    client = ProxyClient(registered.url)
    assert client.post(HEARTBEAT, {"instance_id": "gpu-2"}).kind == UNKNOWN_INSTANCE
    registered.status = 401
    rejected = client.post(HEARTBEAT, {"instance_id": "gpu-1"})
    assert rejected.kind == REJECTED and rejected.detail.startswith("HTTP 401: ")
    registered.status = 503
    assert (client.post(HEARTBEAT, {}).kind, client.post(HEARTBEAT, {}).detail) == (UNAVAILABLE, "HTTP 503")


@pytest.mark.parametrize("content_type, answer", [
    ("text/html", b"<html><body>Welcome to nginx!</body></html>"),
    ("application/json", b"[1, 2, 3]"),
])
def test_it_takes_a_200_that_is_not_a_json_object_for_no_answer(fake_proxy, content_type, answer):
    fake_proxy.raw_answer = (content_type, answer)
    answer = ProxyClient(fake_proxy.url).post(SNAPSHOT, {})
    assert answer.kind == UNAVAILABLE and "HTTP 200 but not a JSON object" in answer.detail


def test_it_keeps_one_connection_alive_across_requests(registered):
    client = ProxyClient(registered.url)
    for _ in range(5):
        assert client.post(HEARTBEAT, {"instance_id": "gpu-1"}).kind == OK
    assert registered.connections == 1


def test_it_opens_a_new_connection_when_the_proxy_closed_the_idle_one_and_sends_once(registered):
    client = ProxyClient(registered.url)
    assert client.post(HEARTBEAT, {"instance_id": "gpu-1"}).kind == OK
    registered.close_idle()  # as the Proxy does with a connection idle for 10 s
    time.sleep(0.05)  # the close reaching the client's socket
    assert client.post(HEARTBEAT, {"instance_id": "gpu-1"}).kind == OK
    assert registered.connections == 2
    assert len(registered.bodies(HEARTBEAT)) == 2  # no request written to the closed connection


def test_it_sends_again_once_when_a_kept_alive_connection_closes_under_the_request(registered):
    client = ProxyClient(registered.url)
    assert client.post(HEARTBEAT, {"instance_id": "gpu-1"}).kind == OK
    registered.hang_up_next = 1  # the Proxy closes the connection as the request arrives
    assert client.post(HEARTBEAT, {"instance_id": "gpu-1"}).kind == OK
    assert (registered.connections, len(registered.bodies(HEARTBEAT))) == (2, 3)


def test_it_does_not_send_again_on_a_connection_it_has_just_opened(registered):
    registered.hang_up_next = 1
    answer = ProxyClient(registered.url).post(HEARTBEAT, {"instance_id": "gpu-1"})
    assert answer.kind == UNAVAILABLE and "RemoteDisconnected" in answer.detail
    assert len(registered.bodies(HEARTBEAT)) == 1


def test_it_reads_no_more_of_a_huge_answer_than_its_bound_and_drops_that_connection(fake_proxy):
    fake_proxy.raw_answer = ("application/json", b'{"ok": true, "pad": "' + b"x" * 50_000_000 + b'"}')
    client = ProxyClient(fake_proxy.url, timeout_s=5.0)
    answer = client.post(SNAPSHOT, {})
    assert answer.kind == UNAVAILABLE and f"over {MAX_ANSWER_BYTES} bytes" in answer.detail
    # The client closed the connection after its bound: the Proxy could not hand it the rest
    # (what the kernel's socket buffers took is all it wrote).
    assert fake_proxy.raw_sent < 20_000_000
    fake_proxy.raw_answer = None
    assert client.post(SNAPSHOT, {}).kind == UNKNOWN_INSTANCE  # a new connection, read from its start
    assert fake_proxy.connections == 2


def test_it_counts_connection_refused_as_unavailable():
    answer = ProxyClient(f"http://127.0.0.1:{free_port()}", timeout_s=1.0).post(SNAPSHOT, {})
    assert answer.kind == UNAVAILABLE and "ConnectionRefusedError" in answer.detail


def test_it_gives_a_hanging_proxy_one_timeout_the_call_may_shorten():
    # A listener that never accepts: the connection sits in the backlog unanswered.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        client = ProxyClient(f"http://127.0.0.1:{sock.getsockname()[1]}", timeout_s=30.0)
        started = time.monotonic()
        answer = client.post(SNAPSHOT, {}, timeout_s=0.2)
        assert answer.kind == UNAVAILABLE and "timed out" in answer.detail
        assert time.monotonic() - started < 5


def test_it_ignores_the_http_proxy_variables(registered, monkeypatch):
    dead = f"http://127.0.0.1:{free_port()}"
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, dead)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert ProxyClient(registered.url).post(HEARTBEAT, {"instance_id": "gpu-1"}).kind == OK


# --- HTTPS --------------------------------------------------------------------------


@pytest.fixture
def tls_proxy(tmp_path):
    """An HTTPS server on 127.0.0.1 answering ``{"ok": true}``, with a self-signed certificate.

    ``(url, certificate path, the connections it accepted)``.
    """
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=30)

    connections = []

    class Handler(FakeHandler):
        protocol_version = "HTTP/1.1"

        def setup(self):
            super().setup()
            connections.append(self.client_address)

        def do_POST(self):  # noqa: N802 - stdlib name
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.answer(json.dumps({"ok": True}).encode())

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"https://127.0.0.1:{httpd.server_address[1]}", cert, connections
    httpd.shutdown()
    httpd.server_close()


def test_it_trusts_what_ssl_cert_file_names(tls_proxy, monkeypatch):
    url, cert, connections = tls_proxy
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    client = ProxyClient(url, timeout_s=5.0)
    for _ in range(3):
        assert client.post(HEARTBEAT, {}).kind == OK
    assert len(connections) == 1  # one handshake, then the kept-alive TLS connection


def test_it_refuses_a_certificate_the_trust_store_does_not_hold(tls_proxy, tmp_path, monkeypatch):
    url, _, _ = tls_proxy
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "none.pem"))
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    answer = ProxyClient(url, timeout_s=5.0).post(HEARTBEAT, {})
    assert answer.kind == UNAVAILABLE and "CERTIFICATE_VERIFY_FAILED" in answer.detail

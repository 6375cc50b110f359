"""A NUL (or another control character) in a header is refused by the web server itself, without the envelope.

granian's HTTP parser (hyper's) refuses such a request before the application
sees it, and offers no hook to answer otherwise; docs/api.md ("Refused by the
web server") says what a client gets, and this holds it to what the server
does, on each entry point: a bare 400, an empty body, the connection closed.
"""

import socket

import pytest
import requests

from tests.live import LiveServer

pytestmark = pytest.mark.live

REQUESTS = {  # (the request line, the header that holds the character)
    "value": (b"GET /healthz", b"X-Trace: a\x00b"),
    "token": (b"GET /v1/instance/list", b"Authorization: Bearer fw_\x00"),
    "name": (b"GET /healthz", b"X-Tr\x00ace: ab"),
    "cookie": (b"GET /pool/", b"Cookie: sessionid=a\x00b"),
    "hot lane": (b"POST /v1/instance/heartbeat", b"X-Trace: \x00"),
    "django": (b"POST /v1/instance/register", b"X-Trace: \x00"),
    "control character": (b"GET /healthz", b"X-Trace: a\x01b"),
}


def answer_to(port, line, header):
    """Everything the server sends until it closes the connection."""
    request = (line + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n" + header +
               b"\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):  # b"" once the server has closed it
            answer += chunk
    return answer


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = LiveServer(tmp_path_factory.mktemp("headers"), roles="proxy").start()
    yield server
    server.stop()
    server.database.drop()


@pytest.mark.parametrize("case", list(REQUESTS))
def test_it_is_a_bare_400_and_the_connection_ends(server, case):
    head, _, body = answer_to(server.port, *REQUESTS[case]).partition(b"\r\n\r\n")
    status, *headers = head.decode().split("\r\n")
    assert status == "HTTP/1.1 400 Bad Request"
    assert sorted(name.lower() for name, _ in (header.split(": ", 1) for header in headers)) == [
        "connection", "content-length", "date"]
    assert {"connection: close", "content-length: 0"} <= {header.lower() for header in headers}
    assert body == b""
    assert requests.get(server.url + "/healthz", timeout=10).status_code == 200

"""After a 413 a keep-alive client is told the connection ends, and loses no request (issue 20).

The server answers a too-large body without reading it, so the connection
cannot carry another request; granian closed it without saying so about
nine times in ten, and a client that sent its next request on it got no
answer. The 413 now says ``Connection: close``.
"""

import http.client
import json
import socket

import pytest
import requests

from tests.live import LiveServer
from tests.system.test_auth import create_token

pytestmark = pytest.mark.live

TRIES = 10


def read_answer(sock):
    """One HTTP answer's head and as much of its body as came with it (the envelope is short)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def oversized_post(size):
    body = b'{"instance_id": "' + b"x" * size + b'"}'
    return (b"POST /v1/instance/heartbeat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


@pytest.mark.parametrize("size", [300_000, 2_000_000])
def test_it_says_connection_close_on_every_413(servers, size):
    server = servers(roles="proxy").start()
    for _ in range(TRIES):
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            try:
                sock.sendall(oversized_post(size))
            except OSError:
                pass  # the server may stop reading once it has answered
            head = read_answer(sock).split(b"\r\n\r\n")[0].lower()
            assert head.startswith(b"http/1.1 413"), head
            assert b"\r\nconnection: close" in head


def test_a_keep_alive_client_gets_an_answer_to_the_request_after_a_413(servers):
    server = servers(roles="proxy").start()
    session = requests.Session()
    answers = []
    for _ in range(TRIES):
        too_large = session.post(server.url + "/v1/instance/heartbeat", data=b"x" * 300_000,
                                 headers={"Content-Type": "application/json"}, timeout=10)
        answers.append((too_large.status_code, too_large.json()["error"]))
        # The next request on the same session: the client opens a new connection because it was told to.
        answers.append((session.get(server.url + "/healthz", timeout=10).status_code, None))
    assert answers == [(413, "payload_too_large"), (200, None)] * TRIES


# --- every refusal answered before the body is read (issue 30) ----------------------------------------------
#
# The server answered a refused POST without reading its body and then closed the connection without saying
# so whenever the rest of the body had not arrived yet: 270 of 300 such requests with a 100 KB body lost the
# request after them. Each refusal, on both entry points (the hot lane's snapshot and Django's register),
# is sent ROUNDS times over one kept-alive http.client connection, each followed by a GET on it.

ROUNDS = 60
SNAPSHOT, REGISTER = "/v1/instance/resource_snapshot", "/v1/instance/register"
UNKNOWN_TOKEN = "fw_" + "u" * 43  # well-formed, so it is looked up
PADDED = json.dumps({"instance_id": "ka-1", "host": "10.0.0.1", "port": 9000, "pad": "x" * 100_000}).encode()
REFUSALS = [  # (name, method, headers beyond the token, body, the token's scope or None, expected status)
    ("wrong Host", "POST", {"Host": "elsewhere.example"}, PADDED, "instance", 400),
    ("malformed JSON", "POST", {}, b"{" + b"x" * 100_000, "instance", 400),
    ("unknown token", "POST", {}, PADDED, "unknown", 401),
    ("no token", "POST", {}, PADDED, None, 401),
    ("wrong scope", "POST", {}, PADDED, "read", 403),
    ("method", "PUT", {}, PADDED, "instance", 405),
    ("content type", "POST", {"Content-Type": "text/plain"}, PADDED, "instance", 415),
    ("rate limit", "POST", {}, PADDED, "instance", 429),
]


def kept_alive_rounds(port, method, path, headers, body, rounds=ROUNDS):
    """Each refused request and a GET /healthz after it, over one kept-alive ``http.client`` connection
    (reopened only when an answer said ``Connection: close``): the statuses answered, or what was lost."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    answers = []
    for _ in range(rounds):
        for request in ((method, path, body, headers), ("GET", "/healthz", None, {})):
            try:
                connection.request(*request)
                response = connection.getresponse()
                response.read()
                answers.append(response.status)
            except (http.client.HTTPException, OSError) as exc:  # the request was lost
                answers.append(type(exc).__name__)
                connection.close()
    connection.close()
    return answers


@pytest.fixture(scope="module")
def refusing_server(tmp_path_factory):
    # No trusted network (every write needs a token) and one write an hour per token and instance.
    server = LiveServer(tmp_path_factory.mktemp("refusals"), roles="proxy",
                        env={"FLEETWATCH_TRUSTED_NETWORKS": "", "FLEETWATCH_RATE_LIMIT": "1",
                             "FLEETWATCH_RATE_WINDOW_S": "3600"}).start()
    tokens = {scope: create_token(server, "--scope", scope, "--name", f"keep-alive-{scope}")
              for scope in ("instance", "read")}
    yield server, {**tokens, "unknown": UNKNOWN_TOKEN}
    server.stop()
    server.database.drop()


@pytest.mark.parametrize("path", [SNAPSHOT, REGISTER], ids=["hot lane", "django"])
@pytest.mark.parametrize("name, method, extra, body, scope, status", REFUSALS, ids=[case[0] for case in REFUSALS])
def test_a_keep_alive_client_loses_no_request_after_a_refusal(refusing_server, path, name, method, extra, body,
                                                               scope, status):
    server, tokens = refusing_server
    headers = {"Content-Type": "application/json", **extra}
    if scope is not None:
        headers["Authorization"] = f"Bearer {tokens[scope]}"
    answers = kept_alive_rounds(server.port, method, path, headers, body, rounds=ROUNDS + 1)
    if status == 429:  # the first may be the one write the web process it reached still allows
        answers[0] = 429
    assert answers == [status, 200] * (ROUNDS + 1)

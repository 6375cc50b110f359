"""2,000 idle keep-alive connections and 2,000 slowloris clients together do not keep a new client waiting (issue 20).

With granian's defaults (a backlog of 1,024, as many connections per
worker as the backlog over the workers, a 30 s header timeout) about 1,100
such connections left new requests unanswered for up to 33 s. ``up`` now
sets its own limits (``controlplane.ops.up.web_server_argv``,
docs/security.md): while the flood holds its connections, and the slow
clients reconnect whenever they are dropped, a fresh client's report and
``/healthz`` are answered, probe after probe. The flood runs in one thread
over non-blocking sockets; the test takes about half a minute.
"""

import resource
import selectors
import socket
import threading
import time

import pytest
import requests

from tests.live import wait_for

pytestmark = pytest.mark.live

IDLE = 2_000
SLOW = 2_000
PROBES = 15  # a second apart: longer than the header timeout, so the probes meet reconnecting clients
PROBE_TIMEOUT_S = 2.0
SLOW_HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"x" * 4000


@pytest.fixture(autouse=True)
def enough_descriptors():
    """The flood's 4,000 sockets need more descriptors than many shells allow a process."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, IDLE + SLOW + 1_000)
    assert wanted >= IDLE + SLOW + 500, f"the hard limit of open files ({hard}) is too low for this test"
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def connect(port):
    sock = socket.socket()
    sock.setblocking(False)
    sock.connect_ex(("127.0.0.1", port))
    return sock


class Flood(threading.Thread):
    """Holds ``IDLE`` keep-alive connections that asked once and went quiet, and ``SLOW`` that send
    their headers a byte a second and never finish; any connection the server drops connects again."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.stop = threading.Event()
        self.selector = selectors.DefaultSelector()
        self.idle_answered = 0
        self.dropped = 0
        self.slow = {}  # socket -> bytes of SLOW_HEAD sent

    def held(self):
        return len(self.selector.get_map())

    def open_idle(self, count):
        request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        for _ in range(count):
            sock = connect(self.port)
            self.selector.register(sock, selectors.EVENT_WRITE, ("idle", request))

    def open_slow(self, count):
        for _ in range(count):
            sock = connect(self.port)
            self.slow[sock] = 0
            self.selector.register(sock, selectors.EVENT_READ, ("slow", None))

    def run(self):
        self.open_idle(IDLE)
        self.open_slow(SLOW)
        next_byte = time.monotonic()
        while not self.stop.is_set():
            for key, events in self.selector.select(timeout=0.1):
                kind, request = key.data
                sock = key.fileobj
                if kind == "idle" and events & selectors.EVENT_WRITE:
                    try:
                        sock.send(request)
                    except OSError:
                        pass
                    self.selector.modify(sock, selectors.EVENT_READ, ("idle", None))
                elif events & selectors.EVENT_READ:
                    try:
                        data = sock.recv(65536)
                    except OSError:
                        data = b""
                    if kind == "idle" and data:
                        self.idle_answered += 1  # answered; now it stays open and says nothing
                    elif not data:
                        self.selector.unregister(sock)
                        sock.close()
                        self.dropped += 1
                        if kind == "slow":
                            del self.slow[sock]
                            self.open_slow(1)
                        else:
                            self.open_idle(1)
            if time.monotonic() >= next_byte:
                next_byte += 1.0
                for sock, sent in list(self.slow.items()):
                    try:
                        sock.send(SLOW_HEAD[sent % len(SLOW_HEAD): sent % len(SLOW_HEAD) + 1])
                        self.slow[sock] = sent + 1
                    except OSError:
                        pass
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()


def probe(server, seq):
    """A new client: a report and /healthz on a fresh connection each; the seconds each took, None if unanswered."""
    times = []
    for method, path, body in (("post", "/v1/instance/heartbeat", {"instance_id": "flood-probe", "inflight": seq}),
                               ("get", "/healthz", None)):
        started = time.monotonic()
        try:
            response = requests.request(method, server.url + path, json=body, timeout=PROBE_TIMEOUT_S,
                                        headers={"Connection": "close"})
            times.append(time.monotonic() - started if response.status_code == 200 else response.status_code)
        except requests.RequestException:
            times.append(None)
    return times


def test_it_answers_new_clients_while_4000_connections_sit_idle_or_dribble(servers):
    server = servers(roles="proxy", env={"FLEETWATCH_RATE_LIMIT": "0"}).start()
    assert server.post("/v1/instance/register", {"instance_id": "flood-probe", "host": "10.0.0.1", "port": 1}).ok
    flood = Flood(server.port)
    flood.start()
    try:
        wait_for(lambda: flood.idle_answered >= IDLE * 0.95, timeout_s=60, message="the idle connections' first answers")
        answers, held = [], []
        for seq in range(PROBES):
            held.append(flood.held())
            answers.append(probe(server, seq))
            time.sleep(1.0)
        unanswered = [times for times in answers if any(not isinstance(t, float) for t in times)]
        assert unanswered == [], (answers, held, flood.dropped)
        # The flood was there all along: the server dropped connections (the header timeout), and each came back.
        assert min(held) >= (IDLE + SLOW) * 0.95, held
        assert flood.dropped >= SLOW
    finally:
        flood.stop.set()
        flood.join(30)

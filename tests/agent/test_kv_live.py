"""The agent reading a real ZMQ publisher and reporting to a Proxy over HTTP (SPEC 15.2, 15.3).

The publisher is a pyzmq PUB socket in this process sending what vLLM sends
(multipart topic, 8-byte big-endian sequence, msgpack batch); the Proxy is
``FakeProxy`` over loopback; the engine's ``/metrics`` is a real vLLM capture
(its model is ``tiny``). Nothing here asserts a wall time: waits are bounded
polls.
"""

import subprocess
import sys
import threading
import time

import msgpack
import pytest
import zmq

from agent.app import Agent
from agent.config import Settings
from agent.engines.kv_subscriber import KvSubscriber, receive
from agent.prefix_keys import prompt_keys
from tests.agent.test_engines import get
from tests.agent.test_kv_events import stored
from tests.live import free_port

MODEL = "tiny"  # the capture's model_name
TOKENS = list(range(1, 129)) + list(range(200, 328))
WAIT_S = 10


class Publisher:
    """vLLM's side of the wire: a PUB socket bound on a free port (an XPUB: it also hears subscriptions)."""

    def __init__(self):
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.XPUB)
        self.port = free_port()
        self.socket.bind(f"tcp://127.0.0.1:{self.port}")
        self.seq = 0

    def send(self, *events, rank=0):
        payload = msgpack.packb([time.time(), list(events), rank])
        self.socket.send_multipart((b"", self.seq.to_bytes(8, "big"), payload))
        self.seq += 1

    def subscribed(self):
        """Wait for a subscriber's subscription: what is sent from then on reaches it."""
        assert self.socket.poll(WAIT_S * 1000), "no subscriber"
        assert self.socket.recv()[:1] == b"\x01"

    def send_raw(self, *frames):
        self.socket.send_multipart(frames)

    def close(self):
        self.socket.close(0)
        self.context.term()


@pytest.fixture
def publisher():
    pub = Publisher()
    yield pub
    pub.close()


def test_a_message_is_received_whole_as_recv_multipart_would():
    context = zmq.Context()
    sender, receiver = context.socket(zmq.PAIR), context.socket(zmq.PAIR)
    try:
        sender.bind("inproc://frames")
        receiver.connect("inproc://frames")
        messages = [[b""], [b"", b"\x00" * 8, b"payload"], [b"a", b"", b"c", b"d" * 70_000]]
        for frames in messages * 2:
            sender.send_multipart(frames)
        assert [receive(receiver, 0) for _ in messages] == messages
        assert [receiver.recv_multipart() for _ in messages] == messages
        with pytest.raises(zmq.Again):
            receive(receiver, zmq.NOBLOCK)
    finally:
        sender.close(0)
        receiver.close(0)
        context.term()


def until(predicate, timeout_s=WAIT_S):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    return predicate()


def start_agent(busy_vllm, two_gpus, source, endpoint, proxy=None):
    settings = Settings(listen_port=0, instance_id="gpu-kv", report=proxy is not None,
                        proxy_url=proxy.url if proxy else "http://127.0.0.1:9", sample_interval_ms=100,
                        report_interval_ms=100, engine_urls=(busy_vllm.url,), engine_kv_events=(endpoint,))
    agent = Agent(settings, nvml=two_gpus, source=source)
    agent.start()
    return agent


def kv_events(agent):
    return get(f"http://127.0.0.1:{agent.server.port}/v1/resource/snapshot")["engines"][0]["kv_events"]


def joined(publisher, agent):
    """Send harmless clears until the subscriber hears them (a PUB drops what it sends before SUB joins)."""
    def heard():
        publisher.seq = 0
        publisher.send({"type": "AllBlocksCleared"})
        return agent.engines.subscribers[0].rank(0).events_total > 0
    assert until(heard)


def test_it_reads_a_real_publisher_and_the_proxy_gets_the_keys(busy_vllm, two_gpus, source, fake_proxy, publisher):
    agent = start_agent(busy_vllm, two_gpus, source, f"tcp://127.0.0.1:{publisher.port}", fake_proxy)
    try:
        joined(publisher, agent)
        publisher.send(stored([11, 12], None, TOKENS, size=128))
        expected = set(prompt_keys(MODEL, TOKENS))
        assert until(lambda: fake_proxy.prefix_keys("gpu-kv", busy_vllm.url) == expected)
        figures = until(lambda: (lambda f: f if f["resident_blocks"] == 2 else None)(kv_events(agent)))
        assert figures["status"] == "ok" and figures["block_tokens"] == 16 and figures["gaps_total"] == 0
        publisher.send({"type": "BlockRemoved", "block_hashes": [12], "medium": "GPU"})
        assert until(lambda: fake_proxy.prefix_keys("gpu-kv", busy_vllm.url) == set(prompt_keys(MODEL, TOKENS[:128])))
        bodies = fake_proxy.bodies("/v1/instance/prefix_blocks")
        assert bodies[0]["reset"] is True
        for epoch in {b["epoch"] for b in bodies}:  # the clears of joined() start sets over: each from seq 0
            of_epoch = [b for b in bodies if b["epoch"] == epoch]
            assert of_epoch[0]["reset"] is True and [b["seq"] for b in of_epoch] == list(range(len(of_epoch)))
    finally:
        agent.stop()


def test_a_batch_after_a_quiet_spell_is_taken_at_once_and_a_busy_stream_waits_out_the_hold(publisher):
    now_ms = [0]  # the subscriber's clock: whether a batch follows the last look closely is read on it
    subscriber = KvSubscriber(f"tcp://127.0.0.1:{publisher.port}", 16, lambda rank: MODEL, hold_ms=600_000,
                              quiet_ms=100, clock_ms=lambda: now_ms[0])
    subscriber.start()
    try:
        publisher.subscribed()
        publisher.send(stored([1], None, TOKENS[:16]))  # the first batch: taken at once, no hold after it
        assert until(lambda: subscriber.rank(0).blocks.resident_blocks == 1)
        assert (subscriber.turns, subscriber.holds) == (1, 0)
        now_ms[0] += 60_000
        publisher.send(stored([2], 1, TOKENS[16:32]))  # after a quiet minute: the same
        assert until(lambda: subscriber.rank(0).blocks.resident_blocks == 2)
        assert (subscriber.turns, subscriber.holds) == (2, 0)
        publisher.send(stored([3], 2, TOKENS[32:48]))  # close behind it (the clock stands): taken, then the hold
        assert until(lambda: subscriber.rank(0).blocks.resident_blocks == 3 and subscriber.holds == 1)
        publisher.send(stored([4], 3, TOKENS[48:64]))
    finally:
        subscriber.stop()  # ends the hold at once
    assert not subscriber._thread.is_alive()
    assert (subscriber.turns, subscriber.rank(0).blocks.resident_blocks) == (3, 3)  # held: the fourth never taken


def test_garbage_or_a_silent_publisher_never_delays_the_agent(busy_vllm, two_gpus, source, publisher):
    silent = f"tcp://127.0.0.1:{free_port()}"  # nobody publishes there
    agent = start_agent(busy_vllm, two_gpus, source, silent)
    try:
        assert kv_events(agent)["status"] == "no_events"
        assert get(f"http://127.0.0.1:{agent.server.port}/healthz")["ok"] is True
    finally:
        agent.stop()
    agent = start_agent(busy_vllm, two_gpus, source, f"tcp://127.0.0.1:{publisher.port}")
    try:
        joined(publisher, agent)
        for _ in range(50):
            publisher.send_raw(b"", b"\x00" * 8, b"\xc1 not msgpack")
            publisher.send_raw(b"only one frame")
        figures = until(lambda: (lambda f: f if f["status"] == "error" else None)(kv_events(agent)))
        assert "not msgpack" in figures["error"] or "frames" in figures["error"]
        assert get(f"http://127.0.0.1:{agent.server.port}/healthz")["ok"] is True
        publisher.seq = 1
        publisher.send(stored([1], None, TOKENS[:16]))
        assert until(lambda: kv_events(agent)["resident_blocks"] == 1)
    finally:
        agent.stop()


def test_it_exits_2_naming_the_extra_when_pyzmq_is_missing():
    probe = ("import sys; sys.modules['zmq'] = None\n"
             "from agent.__main__ import main\n"
             "sys.exit(main(['--engine-url', 'http://127.0.0.1:8000', '--engine-kv-events', 'tcp://*:5557']))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "fleetwatch[kv-events]" in result.stderr and "Traceback" not in result.stderr


def test_more_event_endpoints_than_engines_is_a_usage_error():
    result = subprocess.run([sys.executable, "-m", "agent", "--engine-kv-events", "tcp://*:5557"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "paired in order with --engine-url" in result.stderr


class ReplayingPublisher(Publisher):
    """vLLM's publisher with its replay ROUTER: every batch is kept; ``drop`` leaves one off the PUB socket."""

    def __init__(self):
        super().__init__()
        self.router = self.context.socket(zmq.ROUTER)
        self.replay_port = free_port()
        self.router.bind(f"tcp://127.0.0.1:{self.replay_port}")
        self.buffer = []
        self.replays = 0
        self.serving = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def send(self, *events, rank=0, drop=False):
        payload = msgpack.packb([time.time(), list(events), rank])
        self.buffer.append((self.seq, payload))
        if not drop:
            self.socket.send_multipart((b"", self.seq.to_bytes(8, "big"), payload))
        self.seq += 1

    def _serve(self):
        while self.serving:
            if not self.router.poll(50):
                continue
            client, _, start = self.router.recv_multipart()
            self.replays += 1
            first = int.from_bytes(start, "big")
            for seq, payload in list(self.buffer):
                if seq >= first:
                    self.router.send_multipart((client, b"", seq.to_bytes(8, "big"), payload))
            self.router.send_multipart((client, b"", (-1).to_bytes(8, "big", signed=True), b""))

    def close(self):
        self.serving = False
        self.thread.join(5)
        self.router.close(0)
        super().close()


def test_a_sequence_gap_is_replayed_from_the_replay_endpoint():
    publisher = ReplayingPublisher()
    subscriber = KvSubscriber(f"tcp://127.0.0.1:{publisher.port}", 16, lambda rank: MODEL,
                              replay_endpoint=f"tcp://127.0.0.1:{publisher.replay_port}")
    subscriber.start()
    try:
        def heard():
            publisher.buffer.clear()
            publisher.seq = 0
            publisher.send({"type": "AllBlocksCleared"})
            return subscriber.rank(0).events_total > 0
        assert until(heard)
        state = subscriber.rank(0)
        publisher.send({"type": "AllBlocksCleared"})  # the last of the clears: those in flight are in by then
        assert until(lambda: state.last_seq == 1)
        state.blocks.drain()
        publisher.send(stored([1], None, TOKENS[:16]), drop=True)  # lost on the way
        publisher.send(stored([2], 1, TOKENS[16:32]))
        assert until(lambda: state.blocks.resident_blocks == 2)
        assert state.gaps_total == 1 and publisher.replays == 1
        # Replayed in full: the Proxy gets the changes, no reset.
        reset, added, removed = state.blocks.drain()
        assert (reset, sorted(added), removed) == (False, sorted(prompt_keys(MODEL, TOKENS[:32])), [])
    finally:
        subscriber.stop()
        publisher.close()

"""nginx with njs in front of a pool's engines for OpenAI clients (issue 43): Debian's nginx and its njs module
running deploy/nginx/openai-router.conf and fleetwatch.js as documented, a real Proxy placing each body, and
fake engines that answer /v1/completions and /v1/chat/completions in JSON and as SSE streams.

Requests land where placement says, their bodies unchanged; a stream arrives in pieces as the engine sends
them; shed is a 429 with Retry-After, no instance a 503; an engine that refuses connections is reported
`refused` once per request and fenced after three; each answer is reported `ok` (`error` for a 5xx) with the
engine's cached_tokens and placement's predicted_cached_tokens. The feedback goes through a recording relay
to the real Proxy (which fences on it), so the test reads each body nginx posted.
"""

import json
import threading
import time
from http.server import ThreadingHTTPServer

import pytest
import requests

from tests.factories import make_engine, make_snapshot
from tests.fake_http import FakeHandler
from tests.live import free_port, wait_for
from tests.openai_router import OpenAIRouter
from tests.system.test_placement_nginx import ENV, create_token

pytestmark = pytest.mark.live

JSON_CACHED_TOKENS = 77
STREAM_CACHED_TOKENS = 1234


class Engine:
    """A serving engine's stand-in: OpenAI answers naming it, the raw bodies it got, a usage with
    cached_tokens. A streamed answer's last chunk (the usage, a number split over two writes) waits for
    ``release``, so a client that sees the first chunks before it proves nothing held them back."""

    def __init__(self, name, port=None):
        self.name, self.bodies = name, []
        self.release = threading.Event()
        engine = self

        class Handler(FakeHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                engine.bodies.append((self.path, raw))
                body = json.loads(raw)
                if body.get("fail"):
                    return self.answer(b'{"error": "engine failed"}', status=500)
                if not body.get("stream"):
                    return self.answer(json.dumps({"object": "text_completion", "model": engine.name, "usage": {
                        "prompt_tokens": 40, "completion_tokens": 1,
                        "prompt_tokens_details": {"cached_tokens": JSON_CACHED_TOKENS}}}).encode())
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.chunk("data: " + json.dumps({"model": engine.name, "choices": [{"text": "a"}]}) + "\n\n")
                self.chunk('data: {"choices": [{"text": "b"}]}\n\n')
                engine.release.wait(30)
                engine.release.clear()
                self.chunk('data: {"choices": [], "usage": {"prompt_tokens": 40, "prompt_tokens_details": '
                           '{"cached_tokens": 12')
                time.sleep(0.05)
                self.chunk('34}}}\n\ndata: [DONE]\n\n')
                self.wfile.write(b"0\r\n\r\n")

            def chunk(self, text):
                data = text.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", port or 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class FeedbackRelay:
    """Records each feedback body nginx posts and passes it on to the Proxy, whose answer it returns."""

    def __init__(self, proxy_url):
        self.bodies = []
        relay = self

        class Handler(FakeHandler):
            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                relay.bodies.append(json.loads(raw))
                answer = requests.post(proxy_url + self.path, data=raw, timeout=10, headers={
                    "Authorization": self.headers["Authorization"], "Content-Type": "application/json"})
                self.answer(answer.content, status=answer.status_code)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def test_it_places_openai_requests_streams_them_and_reports_what_the_engines_did(servers, tmp_path):
    route_port = free_port()
    server = servers(roles="proxy", env={**ENV, "FLEETWATCH_ROUTE_PORT": str(route_port)}).start()
    agent = {"Authorization": f"Bearer {create_token(server, 'instance')}"}
    reader = {"Authorization": f"Bearer {create_token(server, 'read')}"}
    relay = FeedbackRelay(f"http://127.0.0.1:{route_port}")
    # Placement asks the real Proxy as documented; only the feedback goes by way of the relay.
    router = OpenAIRouter(tmp_path, route_port, create_token(server, "route"), replace=[
        ("proxy_pass http://fleetwatch_placement/v1/placement/feedback;",
         f"proxy_pass http://127.0.0.1:{relay.port}/v1/placement/feedback;", 1),
        ("proxy_pass http://fleetwatch_placement;", f"proxy_pass http://127.0.0.1:{relay.port};", 1),
    ])
    # An id with quotes and a backslash: the feedback body must still be JSON, and name it.
    left, right = Engine('left "a\\b"'), Engine("right")
    try:
        router.start()

        def report(engine, waiting):
            now_ms = int(time.time() * 1000)
            snapshot = make_snapshot(timestamp_ms=now_ms, engines=[
                make_engine(requests_waiting=waiting, kv_cache_usage_ratio=0.1, scraped_at_ms=now_ms)])
            response = requests.post(server.url + "/v1/instance/resource_snapshot", headers=agent, timeout=10,
                                     json={"instance_id": engine.name, "snapshot": snapshot})
            assert response.json() == {"ok": True}

        for engine in (left, right):
            response = requests.post(server.url + "/v1/instance/register", headers=agent, timeout=10, json={
                "instance_id": engine.name, "host": "127.0.0.1", "port": engine.port})
            assert response.status_code == 200, response.text
        report(left, 0)
        report(right, 5)

        def post(path, raw, **kwargs):
            return requests.post(router.url + path, data=raw, headers={"Content-Type": "application/json"},
                                 timeout=30, **kwargs)

        def feedback_count(count):
            return wait_for(lambda: len(relay.bodies) >= count and relay.bodies, timeout_s=10,
                            message=f"{count} feedback bodies")

        # A completion in JSON: on the placed instance, its body byte for byte, `ok` with the usage's figure.
        raw = '{"model":"tiny",  "prompt": "héllo \\"you\\"", "max_tokens": 4, "temperature": 0}'.encode()
        answer = post("/v1/completions", raw)
        assert (answer.status_code, answer.json()["model"]) == (200, left.name), answer.text
        assert left.bodies == [("/v1/completions", raw)] and right.bodies == []
        assert feedback_count(1)[-1] == {"instance_id": left.name, "outcome": "ok", "status_code": 200,
                                         "cached_tokens": JSON_CACHED_TOKENS, "predicted_cached_tokens": 0}

        # A streamed chat: the first chunks arrive while the engine still holds its last one back.
        report(left, 0)
        chat = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True,
                           "stream_options": {"include_usage": True}}).encode()
        with post("/v1/chat/completions", chat, stream=True) as stream:
            assert stream.status_code == 200
            lines = stream.iter_lines()
            first = next(line for line in lines if line)
            assert json.loads(first[len(b"data: "):])["model"] == left.name
            left.release.set()
            rest = b"\n".join(lines)
        assert b'"cached_tokens": 1234}}}' in rest and rest.strip().endswith(b"data: [DONE]")
        assert left.bodies[-1] == ("/v1/chat/completions", chat)
        assert feedback_count(2)[-1] == {"instance_id": left.name, "outcome": "ok", "status_code": 200,
                                         "cached_tokens": STREAM_CACHED_TOKENS, "predicted_cached_tokens": 0}

        # The engine's own 5xx passes through and is reported `error` (the `ok`s after it keep the count of
        # errors in a row below the fence).
        failed = post("/v1/completions", b'{"model": "tiny", "fail": true}')
        assert failed.status_code == 500
        assert feedback_count(3)[-1] == {"instance_id": left.name, "outcome": "error", "status_code": 500,
                                         "predicted_cached_tokens": 0}

        # Placement's prediction travels too: a prompt's token ids placed a second time, learned from the
        # first (SPEC 15.5), is predicted a hit on that instance.
        report(left, 0)
        ids = json.dumps({"model": "tiny", "prompt_token_ids": list(range(64)), "max_tokens": 1}).encode()
        assert post("/v1/completions", ids).status_code == 200
        assert post("/v1/completions", ids).status_code == 200
        first, second = feedback_count(5)[-2:]
        assert (first["predicted_cached_tokens"], second["predicted_cached_tokens"]) == (0, 64), (first, second)

        # The left engine stops: nginx answers 502, reports `refused` once per request; the third fences it.
        report(left, 0)
        left.stop()
        before = len(relay.bodies)
        assert [post("/v1/completions", raw).status_code for _ in range(3)] == [502, 502, 502], router.log()
        assert [body["outcome"] for body in feedback_count(before + 3)[before:]] == ["refused"] * 3
        time.sleep(0.5)  # nothing more comes (a second report of one failure would show here)
        assert len(relay.bodies) == before + 3
        fenced = {row["instance_id"]: row for row in requests.get(
            server.url + "/v1/instance/list", headers=reader, timeout=10).json()}[left.name]
        assert (fenced["fenced"], fenced["fence_reason"]) == (True, "router_refused")
        assert post("/v1/completions", raw).json()["model"] == "right"

        # Every eligible instance over the shed pressure: 429 with Retry-After; a model nobody serves: 503;
        # a body the Proxy refuses: 400.
        report(right, 40)
        shed = post("/v1/completions", raw)
        assert (shed.status_code, shed.headers["Retry-After"], shed.json()) == (429, "1", {"ok": False, "error": "shed"})
        unavailable = post("/v1/chat/completions", b'{"model": "other", "messages": [{"role": "user", "content": "hi"}]}')
        assert (unavailable.status_code, unavailable.json()["error"]) == (503, "unavailable")
        invalid = post("/v1/completions", json.dumps({"model": "tiny", "session_key": "k" * 300}).encode())
        assert (invalid.status_code, invalid.json()["error"]) == (400, "validation_error")
        assert len(right.bodies) == 1

        # The Proxy gone: nginx cannot ask, and says so.
        server.stop()
        gone = post("/v1/completions", raw)
        assert (gone.status_code, gone.json()["error"]) == (502, "placement_failed")
    finally:
        router.stop()
        relay.stop()
        left.stop()
        right.stop()

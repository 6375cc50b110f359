"""Issue 43 end to end: OpenAI chat requests through Debian's nginx with the njs site, placed by a real Proxy
(``up``) from a real vLLM's KV-cache events, with the engine's own tokenizer, which the agent beside it offered (no
operator map is set). The engine's ``cached_tokens`` for each request after the first equals placement's
prediction, and the feedback counters on ``/metrics`` say so; a request whose prefix only that engine holds goes
there although an idle engine stands beside it, and a request with a new prompt goes to the idle one.

The pool's block size is the CPU engine's (128 tokens): at the engine's own granularity the prediction is what
the engine reuses, exactly (docs/placement.md, "Text and chat").
"""

import json
import threading
import time
from http.server import ThreadingHTTPServer

import pytest
import requests

from tests.engines import SERVED_MODEL
from tests.factories import make_engine, make_snapshot
from tests.fake_http import FakeHandler
from tests.live import free_port, wait_for
from tests.openai_router import OpenAIRouter
from tests.system.test_placement_nginx import create_token

pytestmark = pytest.mark.live

ENGINE_BLOCK = 128
PREFIX_VISIBLE_S = 1.5  # SPEC 15.4: an index update is visible to every process within 1 s
# About 720 tokens of the tiny tokenizer: five full engine blocks of it are shared by every chat below.
SYSTEM = "You are Fleetwatch's assistant. Answer in one short paragraph, citing the instance you ran on. " * 18
TURNS = ["Which instance holds my prefix?", "How long until my first token?", "Über: naïve ✓ question",
         "Summarise the cache in three words."]


class IdleEngine:
    """A second engine's stand-in beside the real one: answers chat completions naming itself, counts them."""

    def __init__(self):
        self.bodies = []
        engine = self

        class Handler(FakeHandler):
            def do_POST(self):
                engine.bodies.append(json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0))))
                self.answer(json.dumps({"model": "idle", "usage": {"prompt_tokens": 10, "completion_tokens": 1,
                                                                   "prompt_tokens_details": {"cached_tokens": 0}}
                                        }).encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def chat(turn):
    return {"model": SERVED_MODEL, "max_tokens": 1, "temperature": 0,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": turn}]}


def counters(server):
    """``{instance_id: (cached, predicted)}`` of the feedback counters on ``/metrics``."""
    out = {}
    for line in requests.get(server.url + "/metrics", timeout=10).text.splitlines():
        for family, index in (("fleetwatch_placement_cached_tokens_total", 0),
                              ("fleetwatch_placement_predicted_cached_tokens_total", 1)):
            if line.startswith(family + "{"):
                instance_id = line.split('instance_id="')[1].split('"')[0]
                out.setdefault(instance_id, [0, 0])[index] = int(float(line.rsplit(" ", 1)[1]))
    return {key: tuple(value) for key, value in out.items()}


def test_chats_through_nginx_land_on_the_engine_holding_their_prefix_and_it_reuses_what_was_predicted(
        vllm_server, completion_load, servers, agents, tmp_path):
    route_port = free_port()
    block = str(ENGINE_BLOCK)
    server = servers(roles="proxy", agent=False, env={
        "FLEETWATCH_ROUTE_PORT": str(route_port), "FLEETWATCH_PREFIX_BLOCK_TOKENS": block,
        "FLEETWATCH_ROUTE_SHARE": "1", "FLEETWATCH_INSTANCE_TTL_S": "3600",
        # The route listener at the web server's priority: beside a decoding engine on two shared cores, a
        # niced one waits seconds for its turn (its admission control is another issue's).
        "FLEETWATCH_ROUTE_NICE": "0",
        # Both instances' signals count as fresh however busy the two cores get: a report of the real engine's
        # agent arriving late would leave only the idle one fresh, and this test is about prefix against load.
        "FLEETWATCH_PLACEMENT_MAX_AGE_S": "30"}).start()
    agent = agents(server, "vllm-gateway", args=[
        "--engine-url", vllm_server.url, "--engine-timeout-ms", "3000",
        "--engine-kv-events", vllm_server.kv_events_endpoint, "--prefix-block-tokens", block])
    router = OpenAIRouter(tmp_path, route_port, create_token(server, "route"))
    idle, reporting = IdleEngine(), threading.Event()

    def report_idle():  # the idle engine's instance, fresh and unloaded, as its agent would report it
        while not reporting.wait(0.3):
            now_ms = int(time.time() * 1000)
            snapshot = make_snapshot(timestamp_ms=now_ms, engines=[make_engine(
                requests_waiting=0, requests_running=0, kv_cache_usage_ratio=0.0, scraped_at_ms=now_ms)])
            requests.post(server.url + "/v1/instance/resource_snapshot", timeout=10,
                          json={"instance_id": "idle", "snapshot": snapshot})

    def placed(body):
        # Asked on the web port: a placement counts as pending on its first candidate in the process that
        # answered it, and these questions must not weigh on the route listener's answers to nginx.
        answer = requests.post(server.url + "/v1/placement", json=body, timeout=30)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def through_nginx(body):
        answer = requests.post(router.url + "/v1/chat/completions", json=body, timeout=120)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def counted(expected):
        wait_for(lambda: counters(server).get("vllm-gateway", (0, 0)) == expected, timeout_s=10,
                 message=f"the feedback counters at {expected}")

    try:
        router.start()
        # The agent registered the engine's own address, so nginx sends the client's requests to vLLM.
        listed = {row["instance_id"]: row for row in server.get("/v1/instance/list")}
        assert listed["vllm-gateway"]["port"] == vllm_server.port
        # The tokenizer arrives from the agent, and the engine's events are read (warm-up prompts of their own
        # until the agent's ZMQ subscription counts one).
        warm_up = iter(range(1, 100))

        def ready():
            requests.post(vllm_server.url + "/v1/completions", timeout=60, json={
                "model": SERVED_MODEL, "prompt": [next(warm_up)] * ENGINE_BLOCK, "max_tokens": 1})
            answer = placed(chat(TURNS[0]))
            return answer["tokenizer"] is not None and answer["prefix_source"] == "events" and answer

        first = wait_for(ready, timeout_s=90, interval_s=0.5, message="the agent's tokenizer and events")
        assert first["tokenizer"]["source"] == "agent" and first["prompt_error"] is None

        # The first chat: a system prompt new to the engine, nothing cached or predicted.
        assert first["candidates"][0]["prefix_hit_tokens"] == 0
        answer = through_nginx(chat(TURNS[0]))
        assert (answer["model"], answer["usage"]["prompt_tokens_details"]["cached_tokens"]) == (SERVED_MODEL, 0)
        assert answer["usage"]["prompt_tokens"] == first["prompt_tokens"]  # the engine counts the Proxy's ids
        counted((0, 0))

        # An idle engine beside it, and the real one a little busier: by load alone the idle one comes first.
        assert server.post("/v1/instance/register", {"instance_id": "idle", "host": "127.0.0.1",
                                                     "port": idle.port}).status_code == 200
        threading.Thread(target=report_idle, daemon=True).start()
        completion_load(1)
        fresh = {"model": SERVED_MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "brand new"}]}
        wait_for(lambda: placed(fresh)["candidates"][0]["instance_id"] == "idle", timeout_s=30,
                 message="the idle engine first by load")

        totals = (0, 0)
        for turn in TURNS[1:]:
            # The shared system prompt's engine blocks are in the index (SPEC 15.2, 15.4) and outweigh the load.
            prediction = wait_for(lambda: (c := placed(chat(turn))["candidates"][0])["prefix_hit_tokens"] > 0 and c,
                                  timeout_s=10, message="the shared system prompt's blocks in the index")
            assert prediction["instance_id"] == "vllm-gateway" and "prefix_cache_hit" in prediction["reasons"]
            # The web port's process saw the blocks; the route listener's, which nginx asks, within SPEC 15.4's 1 s.
            time.sleep(PREFIX_VISIBLE_S)
            answer = through_nginx(chat(turn))
            cached = answer["usage"]["prompt_tokens_details"]["cached_tokens"]
            assert answer["model"] == SERVED_MODEL, answer  # the engine that holds the prefix, not the idle one
            assert cached == prediction["prefix_hit_tokens"] >= 5 * ENGINE_BLOCK, (turn, cached, prediction)
            totals = (totals[0] + cached, totals[1] + prediction["prefix_hit_tokens"])
            counted(totals)
        assert idle.bodies == []
        # A chat with a new prompt: nothing cached anywhere, so the idle engine takes it.
        assert through_nginx(fresh)["model"] == "idle" and len(idle.bodies) == 1
    finally:
        reporting.set()
        idle.stop()
        agent.stop()

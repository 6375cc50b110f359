"""Issue 43 end to end: OpenAI chat requests through Debian's nginx with the njs site, placed by a real Proxy
(``up``) from a real vLLM's KV-cache events, with the engine's own tokenizer, which the agent beside it offered (no
operator map is set). The engine's ``cached_tokens`` for each request after the first equals placement's
prediction, and the feedback counters on ``/metrics`` say so. (A second engine beside it, an idle stand-in, was
tried and left out: on two busy cores which of the two nginx's placement named was not stable enough for CI.)

The pool's block size is the CPU engine's (128 tokens): at the engine's own granularity the prediction is what
the engine reuses, exactly (docs/placement.md, "Text and chat").
"""

import time

import pytest
import requests

from tests.engines import SERVED_MODEL
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
        vllm_server, servers, agents, tmp_path):
    route_port = free_port()
    block = str(ENGINE_BLOCK)
    server = servers(roles="proxy", agent=False, env={
        "FLEETWATCH_ROUTE_PORT": str(route_port), "FLEETWATCH_PREFIX_BLOCK_TOKENS": block,
        "FLEETWATCH_ROUTE_SHARE": "1", "FLEETWATCH_INSTANCE_TTL_S": "3600",
        # The route listener at the web server's priority: beside a decoding engine on two shared cores, a
        # niced one waits seconds for its turn (its admission control is another issue's).
        "FLEETWATCH_ROUTE_NICE": "0"}).start()
    agent = agents(server, "vllm-gateway", args=[
        "--engine-url", vllm_server.url, "--engine-timeout-ms", "3000",
        "--engine-kv-events", vllm_server.kv_events_endpoint, "--prefix-block-tokens", block])
    router = OpenAIRouter(tmp_path, route_port, create_token(server, "route"))
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

        totals = (0, 0)
        for turn in TURNS[1:]:
            # The shared system prompt's engine blocks are in the index (SPEC 15.2, 15.4) and outweigh the load.
            prediction = wait_for(lambda: (c := placed(chat(turn))["candidates"][0])["prefix_hit_tokens"] > 0 and c,
                                  timeout_s=10, message="the shared system prompt's blocks in the index")
            assert "prefix_cache_hit" in prediction["reasons"]
            # The web port's process saw the blocks; the route listener's, which nginx asks, within SPEC 15.4's 1 s.
            time.sleep(PREFIX_VISIBLE_S)
            answer = through_nginx(chat(turn))
            cached = answer["usage"]["prompt_tokens_details"]["cached_tokens"]
            assert answer["model"] == SERVED_MODEL, answer
            assert cached == prediction["prefix_hit_tokens"] >= 5 * ENGINE_BLOCK, (turn, cached, prediction)
            totals = (totals[0] + cached, totals[1] + prediction["prefix_hit_tokens"])
            counted(totals)
    finally:
        agent.stop()

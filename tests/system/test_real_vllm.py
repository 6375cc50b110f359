"""The real vLLM that the engine-telemetry tests read (SPEC 13): its ``/metrics`` shows a queue
that builds past ``--max-num-seqs`` and empties, and names the families of the captures the
unit tests parse."""

import time
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from agent.app import Agent
from agent.config import Settings
from agent.prefix_keys import prompt_keys
from tests.engines import MAX_NUM_SEQS, SERVED_MODEL
from tests.live import wait_for

pytestmark = pytest.mark.live

CAPTURES = Path(__file__).resolve().parent.parent / "data" / "engines"


def vllm_families(text):
    return {family.name for family in text_string_to_metric_families(text) if family.name.startswith("vllm:")}


def test_the_queue_builds_past_max_num_seqs_and_empties_when_clients_go(vllm_server, completion_load):
    assert vllm_server.queue() == (0, 0)
    finished_before = vllm_server.metrics()["vllm:request_success"]

    # LONG_COMPLETION tokens each: the first four run far longer than the test waits.
    load = completion_load(12)
    busy = (MAX_NUM_SEQS, 12 - MAX_NUM_SEQS)
    assert vllm_server.wait_for_queue(lambda running, waiting: (running, waiting) == busy,
                                      message=f"(running, waiting) == {busy}") == busy

    load.cancel()
    assert vllm_server.wait_for_queue(lambda running, waiting: running == waiting == 0,
                                      message="the queue empty after the clients went") == (0, 0)
    assert load.drain() == [{"cancelled": True}] * 12
    # The engine aborted them: none ran to its length (an abort is not counted as a success).
    assert vllm_server.metrics()["vllm:request_success"] == finished_before


def test_finished_completions_leave_the_queue_empty_and_count_their_tokens(vllm_server, completion_load):
    before = vllm_server.metrics()

    outcomes = completion_load(6, max_tokens=32).drain()

    assert outcomes == [{"status": 200, "completion_tokens": 32}] * 6
    after = vllm_server.metrics()
    assert (after["vllm:num_requests_running"], after["vllm:num_requests_waiting"]) == (0, 0)
    assert after["vllm:request_success"] - before["vllm:request_success"] == 6
    assert after["vllm:generation_tokens"] - before["vllm:generation_tokens"] == 6 * 32
    assert after["vllm:prompt_tokens"] - before["vllm:prompt_tokens"] == 6 * 3


def test_the_committed_captures_name_the_families_the_real_engine_exports(vllm_server, completion_load):
    idle = vllm_families(vllm_server.metrics_text())
    completion_load(12)
    vllm_server.wait_for_queue(lambda running, waiting: waiting > 0, message="a waiting queue")
    busy = vllm_families(vllm_server.metrics_text())

    captured = {state: vllm_families((CAPTURES / f"vllm-0.32.0-cpu-{state}.prom").read_text())
                for state in ("idle", "busy")}

    assert {"idle": idle, "busy": busy} == captured


def test_the_queue_rises_and_falls_in_the_proxys_list_row_and_pool_summary(
        vllm_server, completion_load, servers, agents):
    """Real vLLM → the agent (``--engine-url``) → ``up`` over HTTP: SPEC 13 end to end."""
    server = servers(roles="proxy", agent=False, env={"FLEETWATCH_INSTANCE_TTL_S": "30"}).start()
    # A generous scrape timeout: on two shared cores a busy vLLM can take longer
    # than the default 500 ms to answer, which is a timeout, not a queue.
    agents(server, "vllm-host", args=["--engine-url", vllm_server.url, "--engine-timeout-ms", "3000"])

    def resource():
        rows = [row for row in server.get("/v1/instance/list") if row["instance_id"] == "vllm-host"]
        return rows[0]["resource"] if rows else None

    def engine_summary():
        return server.get("/debug/pool_resource")["pool_resource"]["engine"]

    idle = wait_for(lambda: (r := resource()) and r["engine_status"] == "ok" and r["requests_waiting"] == 0 and r,
                    timeout_s=120, message="an ok, idle engine in the list row")
    assert (idle["engine_count"], idle["engine_ok_count"], idle["engine_models"]) == (1, 1, ["tiny"])
    assert idle["kv_cache_capacity_tokens"] > 0 and idle["engine_sample_age_ms"] >= 0
    [engine] = idle["raw_resource"]["engines"]
    assert (engine["kind"], engine["url"], engine["status"]) == ("vllm", vllm_server.url, "ok")

    load = completion_load(12)
    busy = wait_for(lambda: (r := resource()) and r["requests_waiting"] == 12 - MAX_NUM_SEQS and r,
                    timeout_s=120, message="the waiting queue in the list row")
    assert busy["requests_running"] == MAX_NUM_SEQS and busy["kv_cache_usage_ratio"] > 0
    summary = wait_for(lambda: (e := engine_summary())["requests_waiting_total"] == 12 - MAX_NUM_SEQS and e,
                       timeout_s=60, message="the waiting queue in the pool summary")
    assert summary["instances_with_engine"] == 1 and summary["requests_running_total"] == MAX_NUM_SEQS
    assert summary["saturation"] == 1.0  # 8 waiting ÷ 5 ≥ 1
    assert summary["models"] == [{"model": "tiny", "instances": 1, "requests_waiting_total": 12 - MAX_NUM_SEQS}]

    load.cancel()
    wait_for(lambda: (r := resource()) and r["requests_waiting"] == 0 and r["requests_running"] == 0,
             timeout_s=120, message="the queue empty again in the list row")
    wait_for(lambda: engine_summary()["requests_waiting_total"] == 0, timeout_s=60,
             message="the queue empty again in the pool summary")


# Token ids below the tiny model's vocabulary (512); 3 full engine blocks of 128 and a partial one.
KV_PROMPT = [(7 * n + 3) % 500 + 1 for n in range(3 * 128 + 40)]
ENGINE_BLOCK = 128  # vLLM's CPU build


def test_the_agent_indexes_the_real_engines_kv_events_by_the_pool_keys(vllm_server):
    """Real vLLM's ZMQ publisher → the agent (``--engine-kv-events``): the resident keys are SPEC 15.1's keys of
    the prompt's full engine blocks, and a second completion hits exactly those blocks in vLLM's own cache."""
    settings = Settings(listen_port=0, instance_id="vllm-kv", report=False, sample_interval_ms=250,
                        engine_urls=(vllm_server.url,), engine_timeout_ms=3000,
                        engine_kv_events=(vllm_server.kv_events_endpoint,))
    agent = Agent(settings)
    agent.start()
    try:
        subscriber = agent.engines.subscribers[0]
        time.sleep(1.0)  # ZMQ's subscription reaches the publisher asynchronously; events before it are not sent
        hits_before = vllm_server.metrics()["vllm:prefix_cache_hits"]
        complete(vllm_server, KV_PROMPT)
        full = len(KV_PROMPT) // ENGINE_BLOCK
        expected = prompt_keys(SERVED_MODEL, KV_PROMPT)[:full * ENGINE_BLOCK // 16]
        wait_for(lambda: sorted(subscriber.rank(0).blocks.keys()) == sorted(expected), timeout_s=30,
                 message=f"the agent's resident keys equal the prompt's {full} full engine blocks' keys "
                         f"(seen {len(subscriber.rank(0).blocks.keys())} keys)")

        def kv_events():  # the snapshot follows within a sample tick
            figures = get_json(f"http://127.0.0.1:{agent.server.port}/v1/resource/snapshot")["engines"][0]["kv_events"]
            return figures if figures["resident_blocks"] == full else None

        figures = wait_for(kv_events, timeout_s=10, message=f"kv_events with {full} resident blocks")
        assert figures["status"] == "ok" and figures["block_tokens"] == 16 and figures["gaps_total"] == 0

        complete(vllm_server, KV_PROMPT)
        hits = vllm_server.metrics()["vllm:prefix_cache_hits"] - hits_before
        assert hits == full * ENGINE_BLOCK
    finally:
        agent.stop()


def complete(server, prompt):
    answer = requests.post(server.url + "/v1/completions", timeout=120,
                           json={"model": SERVED_MODEL, "prompt": prompt, "max_tokens": 1})
    assert answer.status_code == 200, answer.text


def get_json(url):
    return requests.get(url, timeout=10).json()


# A prompt no other test sends (the session's engine keeps its prefix cache between tests): 600 tokens, four
# full engine blocks (512 tokens) and a partial one of 88 that the engine does not cache.
PLACED_PROMPT = [(11 * n + 5) % 509 + 2 for n in range(600)]
# The pool's block size: the default, smaller than the engine's 128, so the agent re-chunks each engine block
# into 8 keys (SPEC 15.2) and the Proxy keys the prompt's 600 tokens into 37 blocks (592 tokens). A hit of
# exactly 512 then says the keys agree block by block across the two sides' chunkings and that the index claims
# no more than the engine's full blocks (the 5 keys of the partial engine block are held nowhere).
POOL_BLOCK = 16
PREFIX_VISIBLE_S = 2.0  # SPEC 15.2 (the agent's changes every 250 ms) + 15.4 (every process sees them within 1 s)


def test_placement_sees_the_real_engines_cached_prefix_and_the_engine_hits_it(vllm_server, servers, agents):
    """Real vLLM's events → the agent (``--engine-kv-events``) → ``up`` → ``POST /v1/placement``: after a
    completion, the instance's ``prefix_hit_tokens`` for that prompt are the engine's full blocks of it within
    2 s, and a second completion sent there hits exactly that many tokens in vLLM's own prefix cache."""
    block_tokens = str(POOL_BLOCK)
    # The route lane's gate off (FLEETWATCH_ROUTE_SHARE=1): this test asks for the same placement ten times a
    # second to time when the blocks show, which on two shared cores beside a busy engine is more than a quarter
    # of a web process (a 429 route_busy, as issue 30 means for a router that floods); the gate has its own tests.
    server = servers(roles="proxy", agent=False, env={"FLEETWATCH_PREFIX_BLOCK_TOKENS": block_tokens,
                                                      "FLEETWATCH_ROUTE_SHARE": "1"}).start()
    agent = agents(server, "vllm-prefix", args=[
        "--engine-url", vllm_server.url, "--engine-timeout-ms", "3000",
        "--engine-kv-events", vllm_server.kv_events_endpoint, "--prefix-block-tokens", block_tokens])
    full_tokens = len(PLACED_PROMPT) // ENGINE_BLOCK * ENGINE_BLOCK

    def place():
        answer = server.post("/v1/placement", {"model": SERVED_MODEL, "prompt_token_ids": PLACED_PROMPT})
        assert answer.status_code == 200, answer.text
        return answer.json()

    def events_total():
        [engine] = agent.snapshot()["engines"]
        return engine["kv_events"]["events_total"]

    # ZMQ's subscription reaches the publisher some time after the agent connects, and events published before
    # it are lost: one-block warm-up prompts of their own (a token repeated) until the agent counts an event.
    warm_up = iter(range(1, 100))
    wait_for(lambda: complete(vllm_server, [next(warm_up)] * ENGINE_BLOCK) or events_total() > 0, timeout_s=60,
             interval_s=0.5, message="the agent counting the engine's events")
    # Until the Proxy hears the engine's events are ok, placement learns from its own answers (SPEC 15.5);
    # from then on it answers from the events, and nothing of this prompt is cached anywhere yet.
    before = wait_for(lambda: (a := place())["prefix_source"] == "events" and a, timeout_s=30,
                      message="placement answering from the engine's events")
    assert [c["prefix_hit_tokens"] for c in before["candidates"]] == [0]

    hits_before = vllm_server.metrics()["vllm:prefix_cache_hits"]
    complete(vllm_server, PLACED_PROMPT)
    completed_at = time.monotonic()
    # A prompt new to the engine: nothing of it was cached, so everything below is this test's doing.
    assert vllm_server.metrics()["vllm:prefix_cache_hits"] == hits_before

    answers = []

    def placed_with_hit():
        answer = place()
        answers.append(answer)
        candidates = [c for c in answer["candidates"] if c["instance_id"] == "vllm-prefix"]
        return candidates and candidates[0]["prefix_hit_tokens"] == full_tokens and (answer, candidates[0])

    try:
        answer, candidate = wait_for(placed_with_hit, timeout_s=30, interval_s=0.1,
                                     message=f"prefix_hit_tokens == {full_tokens}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the last answer: {answers[-1:]}") from None
    visible_after_s = time.monotonic() - completed_at
    assert visible_after_s <= PREFIX_VISIBLE_S, f"the engine's blocks reached placement after {visible_after_s:.2f} s"
    assert answer["prefix_source"] == "events" and answer["verdict"] == "accept"
    assert answer["prompt_blocks"] == len(PLACED_PROMPT) // POOL_BLOCK
    assert candidate["prefix_hit_blocks"] == full_tokens // POOL_BLOCK
    assert "prefix_cache_hit" in candidate["reasons"]
    [figures] = [e["kv_events"] for e in agent.snapshot()["engines"]]
    assert (figures["status"], figures["block_tokens"], figures["gaps_total"]) == ("ok", POOL_BLOCK, 0)

    complete(vllm_server, PLACED_PROMPT)  # "there": the one instance placement named, whose engine this is
    assert vllm_server.metrics()["vllm:prefix_cache_hits"] - hits_before == candidate["prefix_hit_tokens"]

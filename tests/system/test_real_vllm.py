"""The real vLLM that the engine-telemetry tests read (SPEC 13): its ``/metrics`` shows a queue
that builds past ``--max-num-seqs`` and empties, and names the families of the captures the
unit tests parse."""

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.engines import MAX_NUM_SEQS

pytestmark = pytest.mark.live

CAPTURES = Path(__file__).resolve().parent.parent / "data" / "engines"


def vllm_families(text):
    return {family.name for family in text_string_to_metric_families(text) if family.name.startswith("vllm:")}


def test_the_queue_builds_past_max_num_seqs_and_empties_when_clients_go(vllm_server, completion_load):
    assert vllm_server.queue() == (0, 0)
    finished_before = vllm_server.metrics()["vllm:request_success"]

    # 1500 tokens each: the first four run far longer than the test waits.
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

"""The agent as operators run it: ``python -m agent`` in its own process."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.live import free_port

ROOT = Path(__file__).resolve().parents[2]


def agent_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETWATCH_AGENT_")}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def run_agent(*args, timeout=30, env=None):
    return subprocess.run([sys.executable, "-m", "agent", *args], cwd=ROOT, env=env or agent_env(),
                          capture_output=True, text=True, timeout=timeout)


@contextlib.contextmanager
def started_agent(*args, env=None):
    """The agent running in its own process; killed on the way out if the test did not stop it."""
    process = subprocess.Popen([sys.executable, "-m", "agent", *args], cwd=ROOT, env=env or agent_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def get_json(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def wait_until(predicate, timeout_s=15.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_it_prints_one_real_snapshot_with_once():
    result = run_agent("--once", "--no-report", "--sample-interval-ms", "100", "--instance-id", "cli-1")
    assert result.returncode == 0, result.stderr
    snapshot = json.loads(result.stdout)
    assert snapshot["schema_version"] == "resource_snapshot_v1"
    assert snapshot["instance_id"] == "cli-1"
    assert snapshot["hostname"] == socket.gethostname()
    # Two samples were taken, so rates are measured, not the null of a first sample.
    assert 0.0 <= snapshot["devices"]["cpu"]["utilization_pct"] <= 100.0
    assert snapshot["devices"]["memory"]["total_mb"] > 0
    assert isinstance(snapshot["devices"]["gpu"], list)
    assert snapshot["gpu_status"] == "ok" or snapshot["devices"]["gpu"] == []
    assert snapshot["capacity_hint"]["admission_state"] in ("accepting", "degraded", "rejecting")


def test_it_prints_the_engines_it_was_pointed_at_with_once(busy_vllm):
    closed = f"http://127.0.0.1:{free_port()}"
    result = run_agent("--once", "--no-report", "--sample-interval-ms", "100", "--engine-url", busy_vllm.url,
                       env=agent_env(FLEETWATCH_AGENT_ENGINE_URLS=closed))
    assert result.returncode == 0, result.stderr
    [engine] = json.loads(result.stdout)["engines"]  # the flag wins over the variable
    assert (engine["url"], engine["status"], engine["requests_waiting"]) == (busy_vllm.url, "ok", 8)
    assert engine["prompt_tokens_per_s"] == 0.0  # two scrapes: a rate, measured (the capture does not move)


def test_it_reads_engine_urls_from_the_spec_variable(busy_vllm):
    closed = f"http://127.0.0.1:{free_port()}"
    port = free_port()
    with started_agent("--listen", f"127.0.0.1:{port}", "--no-report", "--sample-interval-ms", "100",
                       env=agent_env(FLEETWATCH_AGENT_ENGINE_URLS=f"{busy_vllm.url},{closed}")) as process:
        assert wait_until(lambda: _snapshot_or_none(port) is not None)
        engines = _snapshot_or_none(port)["engines"]
        assert [(e["url"], e["status"]) for e in engines] == [(busy_vllm.url, "ok"), (closed, "unreachable")]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0


def _snapshot_or_none(port):
    try:
        return get_json(f"http://127.0.0.1:{port}/v1/resource/snapshot")[1]
    except OSError:
        return None


def test_it_reports_once_when_a_proxy_is_given(fake_proxy):
    result = run_agent("--once", "--proxy-url", fake_proxy.url, "--sample-interval-ms", "50",
                       "--instance-id", "cli-2")
    assert result.returncode == 0, result.stderr
    assert [path for path, _, _ in fake_proxy.requests] == ["/v1/instance/register", "/v1/instance/resource_snapshot"]
    body = fake_proxy.bodies("/v1/instance/resource_snapshot")[0]
    assert body["snapshot"] == json.loads(result.stdout)
    assert body["metadata"]["report_seq"] == 1


def test_it_exits_non_zero_with_once_when_the_report_fails():
    result = run_agent("--once", "--proxy-url", f"http://127.0.0.1:{free_port()}", "--sample-interval-ms", "50")
    assert result.returncode == 1
    assert json.loads(result.stdout)["schema_version"] == "resource_snapshot_v1"
    assert "report to http://127.0.0.1" in result.stderr and "failed" in result.stderr


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_it_serves_reports_and_unregisters_on_a_signal(fake_proxy, stop_signal):
    port = free_port()
    with started_agent("--listen", f"127.0.0.1:{port}", "--proxy-url", fake_proxy.url, "--instance-id", "svc-1",
                       "--sample-interval-ms", "100", "--report-interval-ms", "100") as process:
        assert fake_proxy.wait_for(lambda proxy: len(proxy.bodies("/v1/instance/resource_snapshot")) >= 3, 15)
        assert get_json(f"http://127.0.0.1:{port}/healthz")[1]["instance_id"] == "svc-1"
        status, snapshot = get_json(f"http://127.0.0.1:{port}/v1/resource/snapshot?pretty=0")
        assert status == 200 and snapshot["instance_id"] == "svc-1"
        assert snapshot["devices"]["cpu"]["utilization_pct"] is not None
        # The Proxy loses its memory; the agent registers again by itself.
        fake_proxy.forget()
        assert fake_proxy.wait_for(lambda proxy: "svc-1" in proxy.known, 10)
        process.send_signal(stop_signal)
        assert process.wait(timeout=15) == 0
    assert fake_proxy.bodies("/v1/instance/unregister") == [{"instance_id": "svc-1"}]
    registers = fake_proxy.bodies("/v1/instance/register")
    assert len(registers) == 2 and registers[0]["port"] == port
    seqs = [body["metadata"]["report_seq"] for body in fake_proxy.bodies("/v1/instance/resource_snapshot")]
    assert seqs == list(range(1, len(seqs) + 1))


def test_it_keeps_sampling_while_the_proxy_is_down(fake_proxy):
    port = free_port()
    fake_proxy.status = 503
    with started_agent("--listen", f"127.0.0.1:{port}", "--proxy-url", fake_proxy.url,
                       "--sample-interval-ms", "100", "--report-interval-ms", "100") as process:
        assert fake_proxy.wait_for(lambda proxy: len(proxy.requests) >= 2, 15)
        first = get_json(f"http://127.0.0.1:{port}/v1/resource/snapshot")[1]["timestamp_ms"]
        assert wait_until(lambda: get_json(f"http://127.0.0.1:{port}/v1/resource/snapshot")[1]["timestamp_ms"]
                          > first)
        fake_proxy.status = None
        assert fake_proxy.wait_for(lambda proxy: len(proxy.bodies("/v1/instance/resource_snapshot")) >= 1, 15)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0
    stderr = process.stderr.read()
    assert stderr.count("retrying with backoff") == 1  # logged once, not once per attempt
    assert "Proxy reachable again" in stderr


def test_it_fails_cleanly_at_startup_on_a_busy_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        result = run_agent("--listen", f"127.0.0.1:{sock.getsockname()[1]}", "--no-report")
    assert result.returncode == 1
    assert "cannot listen" in result.stderr


def test_it_exits_2_on_bad_settings():
    result = run_agent("--sample-interval-ms", "zero")
    assert result.returncode == 2 and "--sample-interval-ms" in result.stderr

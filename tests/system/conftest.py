import os
import signal
import subprocess
import sys

import pytest
import requests

from tests.live import ROOT, START_TIMEOUT_S, LiveServer, free_port, wait_for


@pytest.fixture
def servers(request, tmp_path):
    """Factory of ``LiveServer``s; every one is stopped and its database dropped afterwards."""
    started = []
    request.node.fleetwatch_servers = started

    def _server(**kwargs):
        server = LiveServer(tmp_path, **kwargs)
        started.append(server)
        return server

    yield _server
    for server in started:
        server.stop()
        server.database.drop()


class AgentProcess:
    """``python -m agent`` in a child process, on its own port, logging to a file under ``tmp_path``."""

    def __init__(self, tmp_path, proxy_url, instance_id, *, port=None, sample_interval_ms=200,
                 report_interval_ms=200, args=()):
        self.instance_id = instance_id
        self.port = port or free_port()
        self.argv = [
            sys.executable, "-m", "agent", "--proxy-url", proxy_url, "--listen", f"127.0.0.1:{self.port}",
            "--instance-id", instance_id, "--sample-interval-ms", str(sample_interval_ms),
            "--report-interval-ms", str(report_interval_ms), *args,
        ]
        self.log_path = tmp_path / f"agent-{instance_id}-{self.port}.log"
        self.process = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "FLEETWATCH_AGENT_"))}
        env["PYTHONUNBUFFERED"] = "1"
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for(self._ready, timeout_s=START_TIMEOUT_S, interval_s=0.1, message=f"agent on {self.url}")
        except AssertionError:
            self.stop()
            raise AssertionError(f"agent did not start; log:\n{self.log()}") from None
        return self

    def _ready(self):
        if self.process.poll() is not None:
            raise AssertionError(f"agent exited with {self.process.returncode}; log:\n{self.log()}")
        return requests.get(self.url + "/healthz", timeout=2).status_code == 200

    def running(self):
        return self.process is not None and self.process.poll() is None

    def get(self, path, **kwargs):
        return requests.get(self.url + path, timeout=5, **kwargs)

    def snapshot(self):
        response = self.get("/v1/resource/snapshot")
        assert response.status_code == 200, response.text
        return response.json()

    def stop(self, timeout_s=30):
        """SIGTERM like systemd, SIGKILL if that does not end it; returns the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def log(self):
        return self.log_path.read_text(errors="replace")[-6000:] if self.log_path.exists() else ""


@pytest.fixture
def agents(request, tmp_path):
    """Factory of started ``AgentProcess``es reporting to a server; all are stopped afterwards.

    ``agents(server, "e2e-1", args=[...])``. Their logs (and the servers') are
    attached to the report of a failed test.
    """
    started = []
    request.node.fleetwatch_agents = started

    def _agent(server, instance_id, **kwargs):
        agent = AgentProcess(tmp_path, server.url, instance_id, **kwargs)
        started.append(agent)
        return agent.start()

    yield _agent
    for agent in started:
        agent.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    for agent in getattr(item, "fleetwatch_agents", ()):
        report.sections.append((f"agent {agent.instance_id} log ({agent.log_path})", agent.log()))
    for server in getattr(item, "fleetwatch_servers", ()):
        report.sections.append((f"server {server.url} log ({server.log_path})", server.log()))

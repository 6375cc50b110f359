import os
import sys

import pytest
import requests

from tests.live import ChildProcess, LiveServer, free_port


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


class AgentProcess(ChildProcess):
    """``python -m agent`` in a child process, on its own port, logging to a file under ``tmp_path``."""

    kind = "agent"
    stop_timeout_s = 30

    def __init__(self, tmp_path, proxy_url, instance_id, *, port=None, sample_interval_ms=200,
                 report_interval_ms=200, args=()):
        self.instance_id = instance_id
        self.port = port or free_port()
        self.command = [
            sys.executable, "-m", "agent", "--proxy-url", proxy_url, "--listen", f"127.0.0.1:{self.port}",
            "--instance-id", instance_id, "--sample-interval-ms", str(sample_interval_ms),
            "--report-interval-ms", str(report_interval_ms), *args,
        ]
        self.log_path = tmp_path / f"agent-{instance_id}-{self.port}.log"

    def argv(self):
        return self.command

    def env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "FLEETWATCH_AGENT_"))}
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def start(self):
        return super().start(interval_s=0.1)

    def get(self, path, **kwargs):
        return requests.get(self.url + path, timeout=5, **kwargs)

    def snapshot(self):
        response = self.get("/v1/resource/snapshot")
        assert response.status_code == 200, response.text
        return response.json()


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

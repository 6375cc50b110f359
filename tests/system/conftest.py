"""Fixtures of the system tests: servers and agents started per test, their logs on failure."""

import pytest

from tests.live import AgentProcess, LiveServer


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

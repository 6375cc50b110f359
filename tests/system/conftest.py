"""Fixtures of the system tests: servers and agents started per test, one real vLLM per
session, their logs on failure."""

import pytest

from tests.engines import CompletionLoad, VllmServer
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


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory):
    """The real vLLM (CPU build, tiny random model, ``--max-num-seqs 4``), started once per session.

    It takes about a minute to start, so every test shares it; tests that load
    it do so through ``completion_load``, which leaves it idle again. Point an
    agent at it with ``--engine-url`` ``vllm_server.url``. Without vLLM's
    interpreter (``./fw test`` provides it) the tests that use it fail. It
    publishes its KV-cache events (``vllm_server.kv_events_endpoint``, SPEC 15.2).
    """
    server = VllmServer(tmp_path_factory.mktemp("vllm"), kv_events=True).start()
    yield server
    server.stop()


@pytest.fixture
def completion_load(vllm_server):
    """Factory of started ``CompletionLoad``s on the session's vLLM:
    ``completion_load(12)`` keeps twelve long completions (``LONG_COMPLETION`` tokens) in flight,
    ``completion_load(6, max_tokens=32)`` six short ones. Afterwards every load
    still running is cancelled and drained, and the engine's queue is awaited
    empty, so the next test finds it idle.
    """
    loads = []

    def _load(count, **kwargs):
        loads.append(CompletionLoad(vllm_server.url, count, **kwargs).start())
        return loads[-1]

    yield _load
    for load in loads:
        load.cancel().drain()
    vllm_server.wait_for_queue(lambda running, waiting: running == waiting == 0, message="the engine idle again")


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
    engine = getattr(item, "funcargs", {}).get("vllm_server")
    if engine is not None:
        report.sections.append((f"vllm {engine.url} log ({engine.log_path})", engine.log()))

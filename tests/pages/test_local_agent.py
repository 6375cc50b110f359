"""Local agent control (proxy_app/ops/local_agent.py) against real processes: the desktop app's semantics.

It starts an agent and records it; any other worker (another LocalAgent on
the same directory) sees and stops it; it refuses a taken port or a second
start with a clear message, reports an agent that dies at start with its
last words, sends SIGTERM and then SIGKILL, and never stops a process it
did not start.
"""

import json
import signal
import socket
import subprocess
import sys
import textwrap

import psutil
import pytest

from proxy_app.ops import local_agent
from proxy_app.ops.local_agent import AgentControlError, LocalAgent, parse_listen
from tests.live import AgentProcess, free_port

pytestmark = pytest.mark.live

NOWHERE = "http://127.0.0.1:9"  # a Proxy nobody answers for: the agent backs off and keeps serving

# Answers /healthz like an agent and ignores SIGTERM: only SIGKILL ends it.
STUBBORN = textwrap.dedent("""
    import http.server, json, signal, sys
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    host, port = sys.argv[1].rsplit(":", 1)
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"ok": True, "agent_version": "stub", "instance_id": "stubborn"}).encode()
            self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
            self.wfile.write(body)
        def log_message(self, *args):
            pass
    http.server.HTTPServer((host, int(port)), Health).serve_forever()
""")


@pytest.fixture
def control(tmp_path):
    """A LocalAgent on a directory of its own; whatever it started is stopped afterwards."""
    made = []

    def _control(**kwargs):
        agent = LocalAgent(tmp_path / "var", **kwargs)
        made.append(agent)
        return agent

    yield _control
    for agent in made:
        try:
            agent.stop()
        except AgentControlError:
            pass


def listen_address():
    return f"127.0.0.1:{free_port()}"


def test_it_starts_an_agent_that_another_worker_sees_and_stops(control):
    listen = listen_address()
    started = control().start(listen, NOWHERE)
    other_worker = control()
    status = other_worker.status()
    assert status.state == "running" and status.agent == started
    assert status.health["instance_id"] == f"hp_{listen}"  # a real agent answering on its address
    assert psutil.Process(started.pid).cmdline()[1:5] == ["-m", "agent", "--proxy-url", NOWHERE]

    assert other_worker.stop() == "stopped"  # SIGTERM was enough: the agent exits 0 on it
    assert not psutil.pid_exists(started.pid) or psutil.Process(started.pid).status() == psutil.STATUS_ZOMBIE
    assert control().status().state == "stopped"
    assert "stopped" in " ".join(other_worker.log_tail())


def test_it_refuses_to_start_a_second_agent(control):
    agent = control()
    first = agent.start(listen_address(), NOWHERE)
    with pytest.raises(AgentControlError, match=rf"already running \(pid {first.pid}"):
        agent.start(listen_address(), NOWHERE)


def test_it_refuses_a_port_another_program_holds(control):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        listen = f"127.0.0.1:{holder.getsockname()[1]}"
        agent = control()
        with pytest.raises(AgentControlError, match=f"{listen} is taken by another program"):
            agent.start(listen, NOWHERE)
    assert agent.status().state == "stopped" and not agent.state_path.exists()


def test_it_names_an_agent_it_did_not_start_on_the_port(control, tmp_path):
    foreign = AgentProcess(tmp_path, NOWHERE, "foreign-1", args=["--no-report"]).start()
    try:
        with pytest.raises(AgentControlError, match="an agent not started here answers there .instance foreign-1."):
            control().start(f"127.0.0.1:{foreign.port}", NOWHERE)
        with pytest.raises(AgentControlError, match="nothing to stop"):
            control().stop()
        assert foreign.running()
    finally:
        foreign.stop()


def test_it_reports_an_agent_that_dies_at_start_with_its_last_words(control):
    def dying(listen, proxy_url):
        return [sys.executable, "-c", "import sys; print('cannot open the model directory', file=sys.stderr); sys.exit(3)"]

    agent = control(argv_for=dying)
    with pytest.raises(AgentControlError, match="exited at start with status 3: cannot open the model directory"):
        agent.start(listen_address(), NOWHERE)
    assert agent.status().state == "stopped"


def test_it_says_the_port_was_taken_when_the_real_agent_cannot_listen(control):
    with socket.socket() as holder:
        # Taken between the check and the agent's own bind: the agent's message is passed on.
        def late_taker(listen, proxy_url):
            holder.bind(("127.0.0.1", port))
            holder.listen()
            return local_agent.agent_argv(listen, proxy_url)

        port = free_port()
        with pytest.raises(AgentControlError, match="could not listen on its address .the port is taken."):
            control(argv_for=late_taker).start(f"127.0.0.1:{port}", NOWHERE)


def test_it_kills_an_agent_that_ignores_sigterm(control):
    agent = control(argv_for=lambda listen, proxy_url: [sys.executable, "-c", STUBBORN, listen], stop_timeout_s=0.5)
    started = agent.start(listen_address(), NOWHERE)
    assert agent.status().health["instance_id"] == "stubborn"
    assert agent.stop() == "killed"
    assert not psutil.pid_exists(started.pid) or psutil.Process(started.pid).status() == psutil.STATUS_ZOMBIE


def test_it_never_stops_a_process_it_did_not_start(control):
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        agent = control()
        agent.var_dir.mkdir(parents=True)
        # The recorded pid now belongs to another process: its create time differs.
        created = psutil.Process(bystander.pid).create_time()
        agent.state_path.write_text(json.dumps({
            "pid": bystander.pid, "create_time": created - 100, "listen": "127.0.0.1:9201",
            "proxy_url": NOWHERE, "started_at": created - 100, "argv": []}))
        assert agent.status().state == "exited"
        with pytest.raises(AgentControlError, match="had already exited"):
            agent.stop()
        assert bystander.poll() is None
        assert agent.status().state == "stopped"
    finally:
        bystander.send_signal(signal.SIGKILL)
        bystander.wait()


def test_it_has_nothing_to_stop_before_anything_started(control):
    with pytest.raises(AgentControlError, match="nothing to stop"):
        control().stop()


@pytest.mark.parametrize("text, expected", [
    ("127.0.0.1:9201", ("127.0.0.1", 9201)),
    ("[::1]:9202", ("::1", 9202)),
    (" localhost:80 ", ("localhost", 80)),
])
def test_it_reads_listen_addresses(text, expected):
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", ["", "9201", "host:", ":9201", "host:0", "host:70000", "host:port", "a b:1"])
def test_it_refuses_what_is_not_an_address(text):
    with pytest.raises(AgentControlError):
        parse_listen(text)


def test_it_suggests_the_first_free_port(control, monkeypatch):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken, free = holder.getsockname()[1], free_port()
        monkeypatch.setattr(local_agent, "SUGGESTED_PORTS", [taken, free])
        assert control().suggested_listen() == f"127.0.0.1:{free}"

"""The agent on the control-plane host: the one way it is launched, and its control from ``/agent/``.

``manage.py up`` (``ProxyAppConfig.up_processes``) and the ``/agent/`` page
both launch it with ``agent_argv`` and ``agent_env``: the agent's own
command line (``agent.launch``) and an instance token issued once under a
name of its own and reused. ``up`` then supervises it with the rest; the
page keeps the original desktop app's semantics: it starts an agent, shows
whether it runs, and stops only an agent it started itself. Steps:

1. **Start**: refuse while an agent started here still runs, or when the
   listen address is taken (a bind test; an agent already answering there is
   named). Then run ``python -m agent --proxy-url <this server> --listen
   <address>`` in a session of its own, its output going to a log file, and
   record its pid *and the process's create time* in a state file. Wait
   until its ``/healthz`` answers or it exits; if it exits, the last line of
   its log is the message (a port taken in between, a bad address).
2. **Status**: the record, and whether its pid is still that process (a pid
   reused by another program has another create time: never ours).
3. **Stop**: only the recorded process: SIGTERM (the agent unregisters and
   exits), SIGKILL if it has not gone after a timeout. The record goes.

The record lives in a file under ``VAR_DIR``, not in memory, so any web
worker can stop what another started, and a restarted server still knows
its agent. A file lock keeps two workers from starting or stopping at once.
"""

import fcntl
import json
import os
import signal
import socket
import subprocess
import threading
import time
from argparse import ArgumentTypeError
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil
import requests
from django.conf import settings

from agent.config import parse_listen as read_listen
from agent.launch import DEFAULT_HOST, DEFAULT_LISTEN, DEFAULT_PORT, TOKEN_VARIABLE, command_line
from controlplane.api.tokens import Scope
from controlplane.ops.local_tokens import LocalTokens

STATE_FILE = "local-agent.json"
LOG_FILE = "local-agent.log"
LOCK_FILE = "local-agent.lock"
SUGGESTED_PORTS = range(DEFAULT_PORT, DEFAULT_PORT + 20)
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
PROBE_TIMEOUT_S = 0.5
LOG_TAIL_LINES = 12


class AgentControlError(Exception):
    """Something the operator is told instead of what they asked for."""


@dataclass(frozen=True)
class StartedAgent:
    """What the state file remembers of the agent started here."""

    pid: int
    create_time: float
    listen: str
    proxy_url: str
    started_at: float
    argv: list = field(default_factory=list)

    @property
    def url(self):
        host, port = parse_listen(self.listen)
        return f"http://{format_host(host)}:{port}"


@dataclass(frozen=True)
class AgentStatus:
    """The agent as ``/agent/`` shows it.

    ``state``: ``running`` (started here, its process alive), ``exited``
    (started here, gone without being stopped here) or ``stopped``.
    ``health`` is its ``/healthz`` answer (None when it does not answer).
    """

    state: str
    agent: StartedAgent | None = None
    health: dict | None = None
    log_tail: list = field(default_factory=list)


def parse_listen(text):
    """``HOST:PORT`` (``[::1]:9201`` for IPv6) as ``(host, port)``, read as the agent reads its ``--listen``;
    AgentControlError when malformed, and for port 0 (the agent would pick a port this page cannot probe)."""
    text = (text or "").strip()
    try:
        host, port = read_listen(text)
    except ArgumentTypeError:
        host, port = "", 0
    if not port or any(c.isspace() for c in host):
        raise AgentControlError(f"“{text}” is not an address: write HOST:PORT with a port from 1 to 65535, "
                                f"e.g. {DEFAULT_LISTEN}.")
    return host, port


def format_host(host):
    return f"[{host}]" if ":" in host else host


def port_is_free(host, port):
    """Whether this host can listen on ``host:port`` now (as the agent's server would, with SO_REUSEADDR)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return False
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError:
            return False
    return True


def probe(listen, timeout_s=PROBE_TIMEOUT_S):
    """The ``/healthz`` answer of an agent at ``listen``, or None when nothing agent-like answers."""
    try:
        host, port = parse_listen(listen)
        response = requests.get(f"http://{format_host(host)}:{port}/healthz", timeout=timeout_s)
        body = response.json()
    except (AgentControlError, requests.RequestException, ValueError):
        return None
    return body if response.status_code == 200 and isinstance(body, dict) and "agent_version" in body else None


def agent_argv(listen, proxy_url):
    """The local agent's command line: the agent's own, reporting to this Proxy at ``proxy_url``."""
    return command_line(proxy_url, listen)


def agent_env(token_name):
    """The local agent's environment: with auth on, an ``instance`` token issued once under ``token_name`` and
    reused (kept with ``up``'s own in ``var/up-tokens.json``), in the variable the agent reads; else nothing."""
    if not settings.FLEETWATCH_AUTH:
        return {}
    return {TOKEN_VARIABLE: LocalTokens().token(token_name, Scope.INSTANCE)}


class LocalAgent:
    """The agent this control plane starts and stops on its own host; state under ``var_dir``."""

    def __init__(self, var_dir, cwd=None, argv_for=agent_argv,
                 start_timeout_s=START_TIMEOUT_S, stop_timeout_s=STOP_TIMEOUT_S):
        self.var_dir, self.cwd, self.argv_for = Path(var_dir), cwd, argv_for
        self.start_timeout_s, self.stop_timeout_s = start_timeout_s, stop_timeout_s

    @classmethod
    def from_settings(cls):
        return cls(settings.VAR_DIR, cwd=settings.BASE_DIR)

    @property
    def state_path(self):
        return self.var_dir / STATE_FILE

    @property
    def log_path(self):
        return self.var_dir / LOG_FILE

    # --- the record -----------------------------------------------------------------

    def _read(self):
        try:
            data = json.loads(self.state_path.read_text())
            return StartedAgent(**data)
        except (OSError, ValueError, TypeError):
            return None

    def _write(self, agent):
        self.var_dir.mkdir(parents=True, exist_ok=True)
        temporary = self.state_path.with_suffix(".tmp")
        temporary.write_text(json.dumps(asdict(agent)))
        os.replace(temporary, self.state_path)

    def _forget(self):
        self.state_path.unlink(missing_ok=True)

    @contextmanager
    def _locked(self):
        self.var_dir.mkdir(parents=True, exist_ok=True)
        with open(self.var_dir / LOCK_FILE, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    @staticmethod
    def _process(agent):
        """The recorded agent's process if it still runs and is the same process; else None."""
        try:
            process = psutil.Process(agent.pid)
            if abs(process.create_time() - agent.create_time) > 0.05:
                return None  # the pid now belongs to another program
            if process.status() == psutil.STATUS_ZOMBIE:
                return None  # exited; its parent (a web worker) has not reaped it yet
            return process
        except psutil.Error:
            return None

    def log_tail(self, lines=LOG_TAIL_LINES):
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - 16384))
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            return []
        return [line for line in text.splitlines() if line.strip()][-lines:]

    # --- status, start, stop ---------------------------------------------------------

    def status(self):
        agent = self._read()
        if agent is None:
            return AgentStatus("stopped")
        if self._process(agent) is None:
            return AgentStatus("exited", agent, log_tail=self.log_tail())
        return AgentStatus("running", agent, health=probe(agent.listen), log_tail=self.log_tail())

    def suggested_listen(self):
        """The first free address from the agent's default port up: what the start form offers."""
        for port in SUGGESTED_PORTS:
            if port_is_free(DEFAULT_HOST, port):
                return f"{DEFAULT_HOST}:{port}"
        return DEFAULT_LISTEN

    def start(self, listen, proxy_url, env=None):
        """Start an agent listening on ``listen`` that reports to ``proxy_url``; returns its record.

        ``env`` is added to its environment (its token goes there, never on
        the command line nor in the state file).
        """
        host, port = parse_listen(listen)
        listen = f"{format_host(host)}:{port}"
        with self._locked():
            running = self._read()
            if running is not None and self._process(running) is not None:
                raise AgentControlError(
                    f"An agent started here is already running (pid {running.pid}, {running.listen}). Stop it first.")
            if not port_is_free(host, port):
                raise AgentControlError(self._taken_message(listen))
            agent, process = self._spawn(listen, proxy_url, env or {})
            self._write(agent)
        return self._await_health(agent, process)

    def _taken_message(self, listen):
        other = probe(listen)
        if other is not None:
            return (f"{listen} is taken: an agent not started here answers there "
                    f"(instance {other.get('instance_id', '?')}). Choose another address.")
        return f"{listen} is taken by another program. Choose another address."

    def _spawn(self, listen, proxy_url, env):
        self.var_dir.mkdir(parents=True, exist_ok=True)
        argv = self.argv_for(listen, proxy_url)
        with open(self.log_path, "wb") as log:
            process = subprocess.Popen(
                argv, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, **env, "PYTHONUNBUFFERED": "1"},
                # Its own session: a signal meant for the web server never reaches it.
                start_new_session=True,
            )
        # The web worker that started it reaps it when it exits, so it never lingers as a zombie.
        threading.Thread(target=process.wait, name="local-agent-reaper", daemon=True).start()
        try:
            create_time = psutil.Process(process.pid).create_time()
        except psutil.Error:
            create_time = 0.0
        agent = StartedAgent(pid=process.pid, create_time=create_time, listen=listen, proxy_url=proxy_url,
                             started_at=time.time(), argv=list(argv))
        return agent, process

    def _await_health(self, agent, process):
        """Wait until the new agent answers; raise with its last words if it exits instead."""
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            code = process.poll()
            if code is not None:
                with self._locked():
                    if self._read() == agent:
                        self._forget()
                raise AgentControlError(self._exit_message(code))
            if probe(agent.listen) is not None:
                return agent
            time.sleep(0.1)
        return agent  # running but slow to answer: the status shows it

    def _exit_message(self, code):
        tail = self.log_tail()
        last = tail[-1] if tail else "no output"
        if any("Address already in use" in line or "cannot listen" in line for line in tail):
            return f"The agent could not listen on its address (the port is taken): {last}"
        return f"The agent exited at start with status {code}: {last}"

    def stop(self):
        """Stop the agent started here: SIGTERM, SIGKILL after the timeout. Returns "stopped" or "killed"."""
        with self._locked():
            agent = self._read()
            if agent is None:
                raise AgentControlError("No agent started here is running: there is nothing to stop.")
            process = self._process(agent)
            if process is None:
                self._forget()
                raise AgentControlError(f"The agent started here (pid {agent.pid}) had already exited.")
            try:
                process.send_signal(signal.SIGTERM)
            except psutil.Error:
                self._forget()
                return "stopped"
            outcome = "stopped"
            if not _wait_gone(process, self.stop_timeout_s):
                outcome = "killed"
                try:
                    process.kill()
                except psutil.Error:
                    pass
                _wait_gone(process, 5.0)
            self._forget()
            return outcome


def _wait_gone(process, timeout_s):
    """Whether ``process`` ended (or is a zombie) within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        except psutil.Error:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)

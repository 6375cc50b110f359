"""Real Fleetwatch processes over loopback, for end-to-end tests.

``LiveDatabase`` gives each server process a fresh database of the backend
the suite runs on (a SQLite file, or a new PostgreSQL database when
DATABASE_URL points at PostgreSQL). ``LiveServer`` runs ``manage.py up`` (or
any role set) as a child process and ``AgentProcess`` runs ``python -m
agent``; both are stopped with SIGTERM like an operator would. Tests wait for
conditions with generous deadlines (``wait_for``); they never sleep a fixed
time or assert how long something took.
"""

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse, urlunparse

import psutil
import requests

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 90


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(condition, timeout_s=60.0, interval_s=0.1, message="condition"):
    """Poll ``condition()`` until it returns a truthy value; return that value."""
    deadline = time.monotonic() + timeout_s
    last_error = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except (requests.RequestException, KeyError, ValueError, IndexError, TypeError) as exc:
            last_error = exc
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {message} (last error: {last_error})")


class LiveDatabase:
    """A fresh database for one server process, on the suite's backend."""

    def __init__(self, tmp_path):
        base = os.environ.get("DATABASE_URL", "")
        self.name = f"fw_live_{uuid.uuid4().hex[:12]}"
        if base.startswith("postgres"):
            parsed = urlparse(base)
            self.admin_url = urlunparse(parsed._replace(path="/postgres"))
            self.url = urlunparse(parsed._replace(path=f"/{self.name}"))
            self.path = None
            self._admin("CREATE DATABASE {}")
        else:
            self.path = Path(tmp_path) / f"{self.name}.sqlite3"
            self.url = f"sqlite:///{self.path}"

    def _admin(self, statement):
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(statement.format(self.name))

    def wipe(self):
        """Lose everything, as an operator restoring an empty database would."""
        if self.path is None:
            self._admin("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            self._admin("CREATE DATABASE {}")
        else:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    def drop(self):
        if self.path is None:
            self._admin("DROP DATABASE IF EXISTS {} WITH (FORCE)")


class ChildProcess:
    """A Fleetwatch program in a child process: started, awaited on ``/healthz``,
    stopped with SIGTERM like systemd would, its output kept in a log file."""

    kind = "process"
    start_timeout_s = START_TIMEOUT_S
    stop_timeout_s = 60
    # A program that forks workers of its own runs in a process group of its
    # own, so stopping it also ends any worker it leaves behind.
    own_process_group = False

    port = None
    log_path = None
    process = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def argv(self):
        raise NotImplementedError

    def env(self):
        return {**os.environ, "PYTHONUNBUFFERED": "1"}

    def start(self, interval_s=0.2):
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.argv(), cwd=ROOT, env=self.env(), stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=self.own_process_group)
        try:
            wait_for(self._ready, timeout_s=self.start_timeout_s, interval_s=interval_s,
                     message=f"{self.kind} on {self.url}")
        except AssertionError:
            self.stop()
            raise AssertionError(f"{self.kind} did not start; log:\n{self.log()}") from None
        return self

    def _ready(self):
        if self.process.poll() is not None:
            raise AssertionError(f"{self.kind} exited with {self.process.returncode}; log:\n{self.log()}")
        return requests.get(self.url + "/healthz", timeout=2).status_code == 200

    def running(self):
        return self.process is not None and self.process.poll() is None

    def kill_everything(self):
        """SIGKILL the process and every process it started, all at once: nothing shuts down cleanly."""
        root = psutil.Process(self.process.pid)
        processes = [root, *root.children(recursive=True)]
        for process in processes:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(processes, timeout=30)
        self.process.wait(30)

    def stop(self, timeout_s=None):
        """SIGTERM, SIGKILL if that does not end it; returns the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s or self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.own_process_group:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:  # every worker ended with it
                pass
        return self.process.returncode

    def log(self):
        """The log's last 6,000 characters, for failure messages; assertions read ``log_since``."""
        return self.log_since(0)[-6000:]

    def log_offset(self):
        """Where the log ends now; ``log_since`` that offset later reads only what was written after it."""
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def log_since(self, offset):
        """The whole log from byte ``offset`` on (a ``log_offset()``): a line written before a test's
        event, or cut off a tail, can neither match nor hide from an assertion about what followed."""
        if not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")


class LiveServer(ChildProcess):
    """``manage.py up`` in a child process, on its own port and database."""

    kind = "server"

    def __init__(self, tmp_path, *, roles="proxy,scheduler", env=None, agent=False, port=None, database=None):
        self.tmp_path = Path(tmp_path)
        self.port = port or free_port()
        self.database = database or LiveDatabase(tmp_path)
        self.roles = roles
        self.agent = agent
        # ``up`` starts its agent on 127.0.0.1:9201 unless told otherwise; a
        # port of its own keeps parallel servers (or a host agent) from clashing.
        self.agent_listen = f"127.0.0.1:{free_port()}" if agent else None
        self.extra_env = dict(env or {})
        self.log_path = self.tmp_path / f"server-{self.port}.log"
        # The route listener, when the test asks for one with FLEETWATCH_ROUTE_PORT.
        route_port = int(self.extra_env.get("FLEETWATCH_ROUTE_PORT") or 0)
        self.route_url = f"http://127.0.0.1:{route_port}" if route_port else None

    def env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DJANGO_SETTINGS"))}
        env.update({
            "DATABASE_URL": self.database.url,
            "FLEETWATCH_ROLES": self.roles,
            "FLEETWATCH_VAR_DIR": str(self.tmp_path / f"var-{self.port}"),
            "FLEETWATCH_Q_WORKERS": "1",
            # Auth stays on; the tests talk to the server as old clients on a
            # trusted network. The processes up starts use the tokens it hands
            # them, and tests/system/test_auth.py runs without this.
            "FLEETWATCH_TRUSTED_NETWORKS": "127.0.0.1/32",
            # No route listener (one more granian per server): the tests that need it ask for a port
            # (tests/system/test_route_flood.py).
            "FLEETWATCH_ROUTE_PORT": "0",
            "PYTHONUNBUFFERED": "1",
        })
        env.update(self.extra_env)
        return env

    def _ready(self):
        """``/healthz`` answers, on the route listener too when there is one."""
        return super()._ready() and (self.route_url is None or
                                     requests.get(self.route_url + "/healthz", timeout=2).status_code == 200)

    def argv(self):
        argv = [sys.executable, str(ROOT / "manage.py"), "up", "--host", "127.0.0.1",
                "--port", str(self.port), "--workers", "2"]
        if not self.agent:
            argv.append("--no-agent")
        elif self.agent_listen:
            argv += ["--agent-listen", self.agent_listen]
        return argv

    def restart(self, wipe=False):
        self.stop()
        if wipe:
            self.database.wipe()
        return self.start()

    def get(self, path, **params):
        response = requests.get(self.url + path, params=params, timeout=10)
        response.raise_for_status()
        return response.json()

    def post(self, path, body):
        return requests.post(self.url + path, json=body, timeout=10)


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


class Nginx(ChildProcess):
    """Debian's nginx in front of several web processes: the documented production shape."""

    kind = "nginx"

    def __init__(self, tmp_path, upstreams, port=None):
        self.port = port or free_port()
        self.prefix = Path(tmp_path) / f"nginx-{self.port}"
        (self.prefix / "logs").mkdir(parents=True, exist_ok=True)
        self.log_path = self.prefix / "logs" / "nginx.log"
        servers = "\n".join(f"        server {upstream};" for upstream in upstreams)
        (self.prefix / "nginx.conf").write_text(f"""
worker_processes 1;
error_log {self.prefix}/logs/error.log warn;
pid {self.prefix}/nginx.pid;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    # Workers run as nobody when started by root and cannot write under a
    # private temporary directory: stream long answers instead of spooling.
    proxy_max_temp_file_size 0;
    client_body_temp_path {self.prefix}/body;
    proxy_temp_path {self.prefix}/proxy;
    fastcgi_temp_path {self.prefix}/fastcgi;
    uwsgi_temp_path {self.prefix}/uwsgi;
    scgi_temp_path {self.prefix}/scgi;
    upstream fleetwatch {{
{servers}
        keepalive 64;
        # Below the web server's idle timeout (FLEETWATCH_WEB_HEADER_TIMEOUT_S, 10 s), so nginx
        # never sends a request into a connection the server is closing.
        keepalive_timeout 5s;
    }}
    server {{
        listen 127.0.0.1:{self.port};
        client_max_body_size 256k;
        location / {{
            proxy_pass http://fleetwatch;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host 127.0.0.1;
        }}
    }}
}}
""")

    def argv(self):
        return ["nginx", "-p", str(self.prefix), "-c", str(self.prefix / "nginx.conf"), "-g", "daemon off;"]

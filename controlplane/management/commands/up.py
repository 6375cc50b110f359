"""``manage.py up``: the whole system on one machine (SPEC 11).

Migrates, registers the periodic schedules, then runs and supervises:
gunicorn (sync workers) serving the roles of FLEETWATCH_ROLES, the django-q2
cluster, the proxy → scheduler link (proxy role), and a local agent
reporting this host to the local proxy (unless --no-agent).
"""

import logging
import os
import sys
import time
from urllib.error import URLError
from urllib.request import urlopen

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from controlplane.supervisor import Supervisor, child_env
from controlplane.tasks import ensure_schedules
from proxy_app.link import default_scheduler_url

log = logging.getLogger("fleetwatch.up")

WILDCARD_HOSTS = {"0.0.0.0", "::", ""}


def default_workers():
    return settings.FLEETWATCH_WEB_WORKERS or min(8, 2 * (os.cpu_count() or 1))


def wait_until_serving(url, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return True
        except (URLError, OSError):
            pass
        time.sleep(0.2)
    return False


class Command(BaseCommand):
    help = "Run the whole Fleetwatch system: web server, task cluster, scheduler link and a local agent."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1", help="Address to listen on (default 127.0.0.1).")
        parser.add_argument("--port", type=int, default=8000, help="Port to listen on (default 8000).")
        parser.add_argument("--no-agent", action="store_true", help="Do not start a local agent.")
        parser.add_argument("--workers", type=int, default=None, help="gunicorn workers (default 2 × CPUs, ≤ 8).")
        parser.add_argument("--agent-listen", default="127.0.0.1:9201", help="HTTP address of the local agent.")

    def handle(self, *args, host, port, no_agent, workers, agent_listen, **options):
        roles = settings.FLEETWATCH_ROLES
        advertise_host = settings.FLEETWATCH_ADVERTISE_HOST or ("127.0.0.1" if host in WILDCARD_HOSTS else host)
        advertise_port = settings.FLEETWATCH_ADVERTISE_PORT or port
        base_url = f"http://{advertise_host}:{port}"

        call_command("migrate", interactive=False, verbosity=0)
        ensure_schedules(roles)

        env = child_env(FLEETWATCH_ADVERTISE_HOST=advertise_host, FLEETWATCH_ADVERTISE_PORT=advertise_port)
        manage = [sys.executable, str(settings.BASE_DIR / "manage.py")]
        supervisor = Supervisor()
        supervisor.install_signal_handlers()
        supervisor.add("web", [
            sys.executable, "-m", "gunicorn", "controlplane.wsgi:application",
            "--bind", f"{host}:{port}", "--workers", str(workers or default_workers()),
            "--worker-class", "sync", "--graceful-timeout", "5", "--timeout", "30",
            "--log-level", "warning", "--chdir", str(settings.BASE_DIR),
        ], env)
        if not wait_until_serving(f"{base_url}/healthz", timeout_s=60):
            supervisor.stop_all()
            raise CommandError(f"the web server did not answer on {base_url} within 60 s")
        supervisor.add("tasks", [*manage, "qcluster"], env)
        if "proxy" in roles:
            if default_scheduler_url():
                supervisor.add("link", [*manage, "run_link"], env)
            else:
                log.warning("no FLEETWATCH_SCHEDULER_URL and no scheduler role here: this proxy reports to no scheduler")
            if not no_agent:
                # A convenience: if it cannot run here (its port is taken, say),
                # the control plane keeps running without it.
                supervisor.add("agent", [
                    sys.executable, "-m", "agent", "--proxy-url", base_url, "--listen", agent_listen,
                ], env, essential=False)

        self.stdout.write(f"Fleetwatch is up ({', '.join(roles)}): dashboard {base_url}/  (Ctrl-C stops)")
        self.stdout.flush()
        code = supervisor.watch()
        self.stdout.write("Fleetwatch stopped.")
        if code:
            raise CommandError("a Fleetwatch process exited unexpectedly; everything was stopped")

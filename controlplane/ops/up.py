"""``manage.py up``: the whole system on one machine (SPEC 11).

Steps of ``run``:

1. Migrate, saying which migration runs (``--no-migrate`` leaves it to a
   separate ``manage.py migrate`` step, as when several hosts share one
   database; ``/readyz`` then answers 503 until it has run), register the
   periodic schedules.
2. Start the web server (granian) serving the roles of ``FLEETWATCH_ROLES``,
   and the routers' own listener (``route_server_argv``) on the next port,
   and wait until ``/healthz`` answers on both.
3. Start the django-q2 cluster and the processes each role's app asks for
   (``AppConfig.up_processes``: the Proxy's recorder, its link to the
   Scheduler and a local agent reporting this host).
4. Supervise until Ctrl-C or SIGTERM (``ops.supervisor``), then stop
   everything within ``FLEETWATCH_STOP_GRACE_S``, the web server last.
"""

import logging
import os
import resource
import shutil
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.error import URLError
from urllib.request import urlopen

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from agent.launch import DEFAULT_LISTEN as AGENT_DEFAULT_LISTEN
from controlplane.ops.local_tokens import LocalTokens
from controlplane.ops.roles import role_apps
from controlplane.ops.supervisor import Supervisor, child_env
from controlplane.ops.tasks import ensure_schedules

log = logging.getLogger("fleetwatch.up")

WILDCARD_HOSTS = {"0.0.0.0", "::", ""}
# How long a stopping granian waits for a worker before killing it. A stopping worker answers nothing
# new (it closes its listener and its idle keep-alive connections at once) but waits for every
# connection it holds to end, and one whose client has not finished sending its request head ends
# only at the header read timeout (FLEETWATCH_WEB_HEADER_TIMEOUT_S, 10 s): on a loaded machine one
# such connection held ``up``'s stop that long (issue 31). A request already running gets this long.
WEB_WORKER_STOP_S = 3


@dataclass(frozen=True)
class UpContext:
    """What an app needs to know to name its processes."""

    manage: list  # argv prefix of a manage.py command in this environment
    base_url: str  # where the web server answers
    agent_listen: str | None  # None: the agent's own default
    start_agent: bool
    roles: tuple

    def token(self, name, scope):
        """A token for a process ``up`` starts (None when auth is off): created once, reused after."""
        if not settings.FLEETWATCH_AUTH:
            return None
        return LocalTokens().token(name, scope)


def fresh_metrics_dir():
    """Where the web processes keep their request metrics (prometheus_client's multiprocess mode);
    emptied at every start, as its documentation asks."""
    path = settings.VAR_DIR / "prometheus"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return str(path)


def default_workers():
    return settings.FLEETWATCH_WEB_WORKERS or min(8, os.cpu_count() or 1)


def port_is_free(host, port):
    """Whether ``port`` can be listened on at ``host`` now."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def refuse_taken(host, port, what):
    """A ``CommandError`` (a clear line, a non-zero exit) when ``port`` is taken at ``host``. granian binds with
    SO_REUSEPORT, so a second server on a taken port would start anyway and share it: requests (and reports)
    split between two control planes and their databases (issue 47)."""
    if not port_is_free(host, port):
        raise CommandError(f"port {port} ({what}) is taken at {host}: another server listens there (another "
                           f"`up`?). Stop it, or choose other ports: `up` takes --port and, for the routers' "
                           f"listener, the next one (--route-port).")


def route_port_of(host, port, asked):
    """The route listener's port: ``asked`` (``--route-port``, else ``FLEETWATCH_ROUTE_PORT``; 0: none; refused
    when it is taken or the web port), or by default the web port + 1 when it is free (a warning and none when it
    is not)."""
    if asked == port:
        raise CommandError(f"the route listener's port {asked} is the web port: choose another (--route-port)")
    if asked:
        refuse_taken(host, asked, "the route listener's, asked for")
    if asked is not None:
        return asked or None
    if port_is_free(host, port + 1):
        return port + 1
    log.warning("port %s is taken: no route listener (routers use port %s; set FLEETWATCH_ROUTE_PORT)",
                port + 1, port)
    return None


def route_server_argv(host, port):
    """The route listener (``FLEETWATCH_ROUTE_PORT``): the same application in ``FLEETWATCH_ROUTE_WORKERS``
    processes of its own, ``FLEETWATCH_ROUTE_NICE`` lower in CPU priority (``Supervisor.add``'s ``niceness``).

    Routers are never rate limited per token, and on the web port their placements share each web
    process's GIL with the agents' reports: the route gate keeps a flood to a share of each process,
    and still a report waits behind the placements admitted beside it (bench/README.md, issue 30).
    Here a flood has processes of its own, and the kernel gives their turn on a busy core to the web
    processes first, so the reports keep their latency whatever routers do; placements are answered
    with what the cores have left. No write lane shares these processes, so the gate is open here.
    """
    return web_server_argv(host, port, settings.FLEETWATCH_ROUTE_WORKERS)


def web_server_argv(host, port, workers):
    """Granian serving the WSGI app: ``workers`` processes of ``FLEETWATCH_WEB_THREADS`` blocking threads each.

    Several requests in flight per process is what lets the reports that arrive
    together share one commit (``controlplane.api.group_commit``; the count is
    measured in docs/scale-out.md). Chosen over gunicorn's sync workers on
    measurements (bench/README.md, docs/scale-out.md): it answers more requests per core, and it drops
    clients that send their headers slowly instead of giving each one a
    worker, so 200 such connections cannot starve /healthz
    (tests/system/test_slow_clients.py). With the connection limits below,
    neither can 2,000 idle and 2,000 slow ones together
    (tests/system/test_connection_flood.py).
    """
    return [
        str(Path(sys.executable).with_name("granian")), "--interface", "wsgi", "controlplane.wsgi:application",
        "--host", host, "--port", str(port), "--workers", str(workers),
        "--blocking-threads", str(settings.FLEETWATCH_WEB_THREADS),
        "--no-ws", "--log-level", "warning", "--workers-kill-timeout", str(WEB_WORKER_STOP_S),
        # Connection limits (docs/security.md, "Slow and hostile clients"): granian's defaults let
        # about 1,100 idle or slow connections shut new clients out (issue 20).
        "--backlog", str(settings.FLEETWATCH_WEB_BACKLOG),
        "--backpressure", str(settings.FLEETWATCH_WEB_CONNECTIONS),
        "--http1-header-read-timeout", str(settings.FLEETWATCH_WEB_HEADER_TIMEOUT_S * 1000),
        "--working-dir", str(settings.BASE_DIR),
    ]


def raise_open_files_limit(workers):
    """Lift this process's soft limit of open files (inherited by the web server it starts) to what
    ``workers`` × ``FLEETWATCH_WEB_CONNECTIONS`` need, at most the hard limit: each connection is
    a descriptor, and a shell's usual 1,024 would cap connections below the server's own limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = workers * settings.FLEETWATCH_WEB_CONNECTIONS + 1024
    target = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if target < wanted:
        log.warning("open files are limited to %s (ulimit -Hn): the web server holds fewer than %s connections",
                    target, workers * settings.FLEETWATCH_WEB_CONNECTIONS)


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


def migrate(out, apply):
    """Apply every unapplied migration, a line per migration as it runs; with ``apply`` off, only say
    which are unapplied (the web processes answer /readyz with 503 until they are)."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    plan = [migration for migration, backwards in executor.migration_plan(executor.loader.graph.leaf_nodes())]
    if not plan:
        return
    names = ", ".join(f"{migration.app_label}.{migration.name}" for migration in plan)
    if not apply:
        log.warning("--no-migrate: %s migration(s) not applied (%s); /readyz answers 503 until "
                    "`manage.py migrate` has run", len(plan), names)
        return
    out.write(f"Applying {len(plan)} migration(s) to the database:")
    out.flush()
    # migrate's own lines: "  Applying app.name... OK", each written as it starts and ends. It wraps
    # its stdout in an OutputWrapper of its own, so it gets the stream under ours (one newline per line).
    call_command("migrate", interactive=False, verbosity=1, stdout=getattr(out, "_out", out))


def login_hint():
    """What ``up`` says about logging in: how to create the first staff user, while auth is on and there is none."""
    if not settings.FLEETWATCH_AUTH or get_user_model().objects.filter(is_staff=True, is_active=True).exists():
        return None
    return ("  the pages need a staff login and there is no staff user yet: ./fw manage createsuperuser "
            "(once; README.md shows it without prompts)")


def banner(roles, base_url, route_url, hint):
    """What ``up`` says once everything answers: where each thing is, and what it needs."""
    lines = [f"Fleetwatch is up ({', '.join(roles)}): dashboard {base_url}/  (Ctrl-C stops)"]
    if "proxy" in roles:
        metrics = f"{base_url}/metrics" + ("" if not settings.FLEETWATCH_AUTH else " (with a token: "
                                           "./fw manage create_token --scope read --name scraper)")
        lines.append(f"  this pool: {base_url}/pool/   API: {base_url}/api/docs/   metrics: {metrics}")
    if route_url:
        lines.append(f"  routers (placement, feedback): {route_url}")
    if hint:
        lines.append(hint)
    return lines


def run(out, *, host, port, start_agent, workers, agent_listen, apply_migrations=True, route_port=None):
    """Run the whole system until asked to stop; ``out`` (a command's stdout) hears what runs where."""
    roles = settings.FLEETWATCH_ROLES
    advertise_host = settings.FLEETWATCH_ADVERTISE_HOST or ("127.0.0.1" if host in WILDCARD_HOSTS else host)
    advertise_port = settings.FLEETWATCH_ADVERTISE_PORT or port
    base_url = f"http://{advertise_host}:{port}"
    refuse_taken(host, port, "the web port")
    route_port = route_port_of(host, port, settings.FLEETWATCH_ROUTE_PORT if route_port is None else route_port)

    migrate(out, apply_migrations)
    ensure_schedules(roles)
    # Asked now, while up still talks to the database it just migrated: once
    # "is up" is printed the database may come and go without stopping up.
    hint = login_hint()
    if not settings.FLEETWATCH_AUTH:
        log.warning("FLEETWATCH_AUTH is off: anyone who can reach port %s may write to this control plane", port)

    # The agent page names up's own agent by its address.
    own_agent = (agent_listen or AGENT_DEFAULT_LISTEN) if start_agent and "proxy" in roles else None
    env = child_env(FLEETWATCH_ADVERTISE_HOST=advertise_host, FLEETWATCH_ADVERTISE_PORT=advertise_port,
                    PROMETHEUS_MULTIPROC_DIR=fresh_metrics_dir(), FLEETWATCH_UP_AGENT_LISTEN=own_agent)
    manage = [sys.executable, str(settings.BASE_DIR / "manage.py")]
    supervisor = Supervisor(grace_s=settings.FLEETWATCH_STOP_GRACE_S)
    supervisor.install_signal_handlers()
    workers = workers or default_workers()
    raise_open_files_limit(workers)
    supervisor.add("web", web_server_argv(host, port, workers), env)
    route_url = f"http://{advertise_host}:{route_port}" if route_port else None
    if route_port:
        supervisor.add("route", route_server_argv(host, route_port),
                       {**env, "FLEETWATCH_ROUTE_SHARE": "1"},
                       niceness=settings.FLEETWATCH_ROUTE_NICE)
    for name, url in (("web server", base_url), ("route listener", route_url)):
        if url and not wait_until_serving(f"{url}/healthz", timeout_s=60):
            supervisor.stop_all()
            raise CommandError(f"the {name} did not answer on {url} within 60 s")
    supervisor.add("tasks", [*manage, "qcluster"], env)
    context = UpContext(manage=manage, base_url=base_url, agent_listen=agent_listen, start_agent=start_agent,
                        roles=tuple(roles))
    for config in role_apps(roles):
        for process in config.up_processes(context):
            supervisor.add(process.name, process.argv, {**env, **process.env}, essential=process.essential)

    for line in banner(roles, base_url, route_url, hint):
        out.write(line)
    out.flush()
    code = supervisor.watch()
    out.write("Fleetwatch stopped.")
    if code:
        raise CommandError("a Fleetwatch process exited unexpectedly; everything was stopped")

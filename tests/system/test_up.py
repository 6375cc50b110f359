"""``manage.py up`` runs every part of the system and stops it cleanly."""

import re
import socket
from datetime import datetime

import psutil
import pytest

from tests.factories import make_gpu, make_snapshot
from tests.live import wait_for

pytestmark = pytest.mark.live

# Hand-registered instances never heartbeat: a TTL far beyond any test keeps
# them alive on a slow machine; the link heartbeats every second.
LIVE_ENV = {"FLEETWATCH_PROXY_HEARTBEAT_S": "1", "FLEETWATCH_INSTANCE_TTL_S": "3600",
            "FLEETWATCH_PROXY_TTL_S": "3600"}
DEADLINE_S = 90


def child_commands(process):
    return [" ".join(child.cmdline()) for child in psutil.Process(process.pid).children(recursive=True)]


def test_it_starts_web_tasks_and_link_and_stops_them_all_on_sigterm(servers):
    server = servers(env=LIVE_ENV).start()
    link = wait_for(lambda: (server.get("/debug/status")["scheduler_link"] or {}).get("registered"),
                    timeout_s=DEADLINE_S, message="the link to register")
    assert link is True
    commands = child_commands(server.process)
    assert any("granian" in c for c in commands)
    assert any("qcluster" in c for c in commands)
    assert any("run_link" in c for c in commands)
    assert any("run_recorder" in c for c in commands)
    children = psutil.Process(server.process.pid).children(recursive=True)

    assert server.stop() == 0
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]


def test_it_reports_two_reporting_instances_to_its_scheduler(servers):
    server = servers(env=LIVE_ENV).start()
    snapshots = {
        "i-1": make_snapshot(cpu=20.0, gpus=[make_gpu(avg=40.0, peak=70.0)]),
        "i-2": make_snapshot(cpu=60.0, used_mb=6000.0, free_mb=2000.0, gpus=[make_gpu(avg=80.0, peak=90.0)]),
    }
    for port, (instance_id, snapshot) in enumerate(snapshots.items(), start=9001):
        assert server.post("/v1/instance/register", {"instance_id": instance_id, "host": "10.0.0.9", "port": port}).ok
        reply = server.post("/v1/instance/resource_snapshot", {"instance_id": instance_id, "snapshot": snapshot})
        assert reply.json() == {"ok": True}

    def scheduler_sees_both():
        proxies = server.get("/debug/proxy_pool_resources")["proxies"]
        summary = proxies[0]["pool_resource"]
        return proxies[0]["is_alive"] and summary["instances"]["alive"] == 2 and summary["instances"]["with_resource"] == 2 and proxies[0]

    entry = wait_for(scheduler_sees_both, timeout_s=DEADLINE_S, message="the scheduler to see both instances")
    local = server.get("/debug/pool_resource")["pool_resource"]
    assert entry["pool_resource"]["utilization"] == local["utilization"]
    assert local["utilization"]["cpu_avg"] == pytest.approx(40.0)
    assert local["utilization"]["gpu_util_max"] == pytest.approx(90.0)


def test_it_keeps_running_when_its_local_agent_cannot_start(servers):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = servers(agent=True)
        server.agent_listen = f"127.0.0.1:{taken.getsockname()[1]}"
        server.start()
        wait_for(lambda: "agent exited" in server.log_since(0), timeout_s=DEADLINE_S,
                 message="the agent to give up on its port")
        assert server.process.poll() is None
        assert server.get("/healthz")["ok"] is True
        assert server.stop() == 0


def test_it_runs_a_proxy_without_a_scheduler_on_its_own(servers):
    server = servers(roles="proxy", env=LIVE_ENV).start()
    assert server.post("/v1/instance/register", {"instance_id": "i-1", "host": "10.0.0.1", "port": 8000}).ok
    # up says so once its web server answers, a moment after /healthz does.
    wait_for(lambda: "reports to no scheduler" in server.log_since(0), timeout_s=DEADLINE_S,
             message="up to say there is no scheduler")
    wait_for(lambda: any("qcluster" in c for c in child_commands(server.process)), timeout_s=DEADLINE_S,
             message="the task cluster")
    assert not any("run_link" in c for c in child_commands(server.process))
    assert server.process.poll() is None
    assert server.stop() == 0


def stop_times(log):
    """When up logged each "stopped …" line, by what it names."""
    found = {}
    for stamp, names in re.findall(r"^(\S+ \S+) INFO fleetwatch\.up\[\d+\]: stopped (.+)$", log, re.MULTILINE):
        found[names] = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f")
    return found


def test_its_web_server_stops_promptly_while_clients_hold_unfinished_requests(servers):
    # A header read timeout far beyond the stop: only granian's own limit on a stopping worker ends these.
    server = servers(roles="proxy", env={**LIVE_ENV, "FLEETWATCH_WEB_HEADER_TIMEOUT_S": "60"}).start()
    # Enough of them for every worker to hold some: clients part-way through sending their request head.
    unfinished = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(8)]
    try:
        for sock in unfinished:
            sock.sendall(b"POST /v1/instance/resource_snapshot HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        wait_for(lambda: server.get("/healthz")["ok"], timeout_s=DEADLINE_S, message="the server to answer")
        logged_from = server.log_offset()
        assert server.stop() == 0
    finally:
        for sock in unfinished:
            sock.close()
    stopped = stop_times(server.log_since(logged_from))
    others = [at for names, at in stopped.items() if names != "web"]
    # Not held until those clients' header read timeout (before issue 31, granian's 10 s per worker).
    assert (stopped["web"] - max(others)).total_seconds() < 8, stopped

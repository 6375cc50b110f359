"""``manage.py up`` runs every part of the system and stops it cleanly."""

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
        wait_for(lambda: "agent exited" in server.log(), timeout_s=DEADLINE_S,
                 message="the agent to give up on its port")
        assert server.process.poll() is None
        assert server.get("/healthz")["ok"] is True
        assert server.stop() == 0


def test_it_runs_a_proxy_without_a_scheduler_on_its_own(servers):
    server = servers(roles="proxy", env=LIVE_ENV).start()
    assert server.post("/v1/instance/register", {"instance_id": "i-1", "host": "10.0.0.1", "port": 8000}).ok
    # up says so once its web server answers, a moment after /healthz does.
    wait_for(lambda: "reports to no scheduler" in server.log(), timeout_s=DEADLINE_S,
             message="up to say there is no scheduler")
    wait_for(lambda: any("qcluster" in c for c in child_commands(server.process)), timeout_s=DEADLINE_S,
             message="the task cluster")
    assert not any("run_link" in c for c in child_commands(server.process))
    assert server.process.poll() is None
    assert server.stop() == 0

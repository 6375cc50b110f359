"""The agent process against a real Fleetwatch server over loopback (issue 4, "End to end").

Every number checked here comes from this host through psutil: the agent is
started as ``python -m agent`` and nothing is faked on either side.
"""

import re
import signal
from pathlib import Path

import psutil
import pytest
import requests

from tests.live import wait_for

pytestmark = pytest.mark.live

# A loaded 2-core machine: a server start (migrations included) can take tens
# of seconds, and the agent's backoff (capped at 30 s) adds to a recovery.
RECOVERY_S = 90
FIRST_REPORT_S = 60
# The agents here report every 200 ms; the TTL is the default's, so "alive"
# means "reporting", and no restart in these tests has to beat it.
LIVE_ENV = {"FLEETWATCH_INSTANCE_TTL_S": "30"}


def start_proxy(servers):
    return servers(roles="proxy", agent=False, env=LIVE_ENV).start()


def row_of(server, instance_id, include_dead=False):
    """The instance's row in ``/v1/instance/list``, or None."""
    for row in server.get("/v1/instance/list", include_dead="true" if include_dead else "false"):
        if row["instance_id"] == instance_id:
            return row
    return None


def reporting_row(server, instance_id):
    """The row once the instance is alive and has reported a sample with a CPU rate."""
    row = row_of(server, instance_id)
    if row and row["is_alive"] and row["resource"]["cpu_util"] is not None:
        return row
    return None


def host_has_nvidia_gpu():
    return Path("/dev/nvidia0").exists()


def test_it_registers_and_reports_live_host_values(servers, agents):
    server = start_proxy(servers)
    agent = agents(server, "e2e-1")

    row = wait_for(lambda: reporting_row(server, "e2e-1"), timeout_s=FIRST_REPORT_S, message="the agent's first reports")
    assert row["host"] == "127.0.0.1" and row["port"] == agent.port
    assert row["meta"]["hostname"] and row["meta"]["agent_version"]
    resource = row["resource"]
    assert 0.0 <= resource["cpu_util"] <= 100.0
    total_mib = psutil.virtual_memory().total / 2**20
    assert resource["memory_total_mb"] == pytest.approx(total_mib, rel=0.01)
    assert 0 < resource["memory_used_mb"] < resource["memory_total_mb"]
    assert 0.0 < resource["memory_free_ratio"] <= 1.0
    assert resource["admission_state"] in ("accepting", "degraded", "rejecting")
    assert resource["reported_instance_id"] == "e2e-1"

    raw = resource["raw_resource"]
    assert raw["schema_version"] == "resource_snapshot_v1"
    assert raw["instance_id"] == "e2e-1"
    assert raw["devices"]["memory"]["total_mb"] == resource["memory_total_mb"]
    if host_has_nvidia_gpu():
        assert raw["gpu_status"] == "ok" and raw["devices"]["gpu"]
    else:
        # No GPU here: an empty list, and the status says why.
        assert raw["devices"]["gpu"] == []
        assert re.fullmatch(r"no_gpu|nvml_unavailable: .+", raw["gpu_status"]), raw["gpu_status"]
        assert resource["gpu_count"] == 0
        assert resource["gpu_mem_total_mb"] is None

    # Reports keep coming, one sequence number after another.
    first_seq = resource["report_seq"]
    assert isinstance(first_seq, int) and first_seq >= 1
    later = wait_for(lambda: (r := row_of(server, "e2e-1")) and r["resource"]["report_seq"] > first_seq and r,
                     timeout_s=FIRST_REPORT_S, message="a later report")
    assert later["resource"]["resource_reported_at"] > resource["resource_reported_at"]
    assert later["resource"]["resource_ts_ms"] >= resource["resource_ts_ms"]

    # The agent's own endpoints (SPEC 2.1).
    health = agent.get("/healthz")
    assert health.status_code == 200
    assert health.json() == {"ok": True, "agent_version": raw["agent_version"], "instance_id": "e2e-1"}
    response = agent.get("/v1/resource/snapshot", params={"any": "query"})
    assert response.status_code == 200 and response.headers["Content-Type"] == "application/json"
    snapshot = response.json()
    assert snapshot["schema_version"] == "resource_snapshot_v1"
    assert snapshot["instance_id"] == "e2e-1"
    assert isinstance(snapshot["timestamp_ms"], int)
    assert snapshot["timestamp_ms"] >= raw["timestamp_ms"]
    assert snapshot["hostname"] == raw["hostname"]
    assert set(snapshot["devices"]) >= {"cpu", "memory", "network", "gpu", "disk"}
    assert 0.0 <= snapshot["devices"]["cpu"]["utilization_pct"] <= 100.0
    assert snapshot["devices"]["cpu"]["count_logical"] == psutil.cpu_count()
    assert snapshot["capacity_hint"]["admission_state"] in ("accepting", "degraded", "rejecting")
    assert all(entry["iface"] != "lo" for entry in snapshot["devices"]["network"])
    assert requests.post(agent.url + "/v1/resource/snapshot", json={}, timeout=5).status_code == 405
    missing = agent.get("/nope")
    assert missing.status_code == 404 and missing.json() == {"ok": False, "error": "not_found"}


def test_it_re_registers_after_the_proxy_loses_its_database(servers, agents):
    server = start_proxy(servers)
    agent = agents(server, "e2e-wipe")
    before = wait_for(lambda: reporting_row(server, "e2e-wipe"), timeout_s=FIRST_REPORT_S, message="the agent's first reports")

    server.restart(wipe=True)

    # Not restarted: its next report gets unknown_instance and it registers
    # again by itself.
    after = wait_for(lambda: reporting_row(server, "e2e-wipe"), timeout_s=RECOVERY_S,
                     message="the agent to re-register with the wiped proxy")
    assert agent.running()
    assert after["registered_at"] > before["registered_at"]
    assert after["port"] == agent.port
    assert after["resource"]["raw_resource"]["schema_version"] == "resource_snapshot_v1"
    # Through unknown_instance, the path SPEC 2.3 describes for a forgotten instance.
    log = agent.log_since(0)
    assert "Proxy does not know instance e2e-wipe" in log
    assert log.count("registered at") == 2


def test_it_keeps_sampling_while_the_proxy_is_down_and_recovers(servers, agents):
    server = start_proxy(servers)
    agent = agents(server, "e2e-down")
    before = wait_for(lambda: reporting_row(server, "e2e-down"), timeout_s=FIRST_REPORT_S, message="the agent's first reports")

    # The agent's log from here on: on a loaded machine a report can fail (and
    # recover) before the outage, and that earlier streak's lines must not count.
    outage_began = agent.log_offset()
    server.stop()
    stopped_at_ms = agent.snapshot()["timestamp_ms"]
    # Several sampling periods go by with the proxy gone: the agent keeps
    # sampling and serving, and stays up.
    seen = set()

    def sampled_on():
        seen.add(agent.snapshot()["timestamp_ms"])
        return len(seen) >= 5 and max(seen) >= stopped_at_ms + 3000

    wait_for(sampled_on, timeout_s=60, message="fresh samples while the proxy is down")
    assert agent.running()
    assert agent.get("/healthz").status_code == 200

    # Nothing answers until the server is back: the recovery it logs is after this.
    back_at = agent.log_offset()
    server.start()
    # A sample taken after the stop can only have been reported to the new process.
    after = wait_for(
        lambda: (r := row_of(server, "e2e-down")) and r["is_alive"]
        and r["resource"]["resource_ts_ms"] > stopped_at_ms and r,
        timeout_s=RECOVERY_S, message="reports after the proxy came back")
    assert after["resource"]["resource_reported_at"] > before["resource"]["resource_reported_at"]
    assert after["resource"]["report_seq"] > before["resource"]["report_seq"]
    assert agent.running()

    # It backed off rather than retrying every report interval, and logged
    # the streak once plus one line on recovery, not once per failure.
    recovered = wait_for(lambda: re.search(r"Proxy reachable again after (\d+) failed attempts over (\d+) s",
                                           agent.log_since(back_at)),
                         timeout_s=FIRST_REPORT_S, message="the recovery log line")
    failures, seconds = int(recovered[1]), int(recovered[2])
    assert failures >= 2
    # Without backoff, a 200 ms report interval would fail five times a second.
    assert failures <= 3 + seconds / 2, (failures, seconds)
    assert agent.log_since(outage_began).count("retrying with backoff") == 1


def test_it_unregisters_on_sigterm(servers, agents):
    server = start_proxy(servers)
    agent = agents(server, "e2e-term")
    wait_for(lambda: reporting_row(server, "e2e-term"), timeout_s=FIRST_REPORT_S, message="the agent's first reports")

    agent.process.send_signal(signal.SIGTERM)
    assert agent.process.wait(30) == 0
    assert row_of(server, "e2e-term", include_dead=True) is None
    assert "unregistered e2e-term" in agent.log()


def test_it_is_reported_by_the_local_agent_that_up_starts(servers):
    server = servers(agent=True, env=LIVE_ENV).start()
    agent_url = f"http://{server.agent_listen}"

    def one_reporting_instance():
        rows = [row for row in server.get("/v1/instance/list") if row["resource"]["cpu_util"] is not None]
        return len(rows) == 1 and rows[0]

    row = wait_for(one_reporting_instance, timeout_s=FIRST_REPORT_S, message="the local agent's instance")
    health = wait_for(lambda: requests.get(agent_url + "/healthz", timeout=2).json(), timeout_s=FIRST_REPORT_S,
                      message="the local agent")
    assert row["instance_id"] == health["instance_id"]
    assert row["is_alive"] is True
    assert row["resource"]["memory_total_mb"] == pytest.approx(psutil.virtual_memory().total / 2**20, rel=0.01)
    [agent_process] = [p for p in psutil.Process(server.process.pid).children(recursive=True)
                       if "agent" in p.cmdline() and "-m" in p.cmdline()]

    assert server.stop() == 0
    assert not agent_process.is_running() or agent_process.status() == psutil.STATUS_ZOMBIE
    with pytest.raises(requests.ConnectionError):
        requests.get(agent_url + "/healthz", timeout=2)

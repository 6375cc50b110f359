"""The simulator split over two processes against a Proxy served by ``up`` (a real database file
or server, so both client processes' connections are real connections)."""

import json
import subprocess
import sys

import pytest
import requests

from tests.live import ROOT

pytestmark = pytest.mark.live


def test_it_drives_one_proxy_from_two_processes(servers, tmp_path):
    server = servers(roles="proxy", env={"FLEETWATCH_INSTANCE_TTL_S": "3600"}).start()
    summary_path = tmp_path / "summary.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "simulate_fleet", "--proxy-url", server.url, "--instances", "6",
         "--interval-ms", "300", "--rounds", "3", "--calm", "--processes", "2", "--no-unregister", "--no-progress",
         "--json", str(summary_path)],
        cwd=ROOT, env=server.env(), capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    summary = json.loads(summary_path.read_text())
    rows = {row["instance_id"]: row for row in requests.get(server.url + "/v1/instance/list", timeout=30).json()}

    assert summary["processes"] == 2 and summary["errors"] == 0
    assert sorted(rows) == [f"sim-0000{i}" for i in range(6)]
    assert sum(row["resource"]["report_seq"] for row in rows.values()) == summary["requests"]["snapshot"]["acknowledged"]

"""The production shape on real engines (issue 12): two web processes of one Proxy on one
database behind nginx, django-q2 on Redis, the link and the recorder once per pool.

The suite's database backend is used (PostgreSQL in the PostgreSQL run).
The simulator drives the fleet through nginx; bench/README.md has the long
run (2,000 instances for 5 minutes) and the throughput figures.
"""

import json
import subprocess
import sys

import pytest
import redis
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.live import ROOT, LiveDatabase, Nginx, wait_for

pytestmark = pytest.mark.live

INSTANCES = 150
DURATION_S = 20
REDIS_URL = "redis://127.0.0.1:6379/7"
ENV = {
    "FLEETWATCH_REDIS_URL": REDIS_URL,
    "FLEETWATCH_INSTANCE_TTL_S": "3600",
    "FLEETWATCH_PROXY_ID": "pool-scale",
}


def snapshots_served(server):
    text = requests.get(server.url + "/metrics", timeout=10).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if (sample.name == "fleetwatch_http_requests_total"
                    and sample.labels.get("view") == "instance-resource-snapshot"):
                return sample.value
    return 0


def test_it_serves_one_pool_from_two_processes_behind_nginx(servers, tmp_path):
    redis.Redis.from_url(REDIS_URL).flushdb()
    database = LiveDatabase(tmp_path)
    first = servers(roles="proxy", env=ENV, database=database).start()
    second = servers(roles="proxy", env=ENV, database=database).start()
    balancer = Nginx(tmp_path, [f"127.0.0.1:{first.port}", f"127.0.0.1:{second.port}"])
    balancer.start()
    try:
        token = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), "create_token", "--scope", "instance", "--name", "sim"],
            cwd=ROOT, env=first.env(), capture_output=True, text=True, check=True,
        ).stdout.splitlines()[-1]
        summary_path = tmp_path / "summary.json"
        run = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), "simulate_fleet", "--proxy-url", balancer.url,
             "--instances", str(INSTANCES), "--interval-ms", "1000", "--duration", str(DURATION_S), "--calm",
             "--no-unregister", "--no-progress", "--json", str(summary_path), "--token", token],
            cwd=ROOT, env=first.env(), capture_output=True, text=True, timeout=600,
        )
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        summary = json.loads(summary_path.read_text())
        assert (summary["errors"], summary["errors_by_kind"]) == (0, {})

        # Zero acknowledged reports lost: report_seq counts each instance's reports from 1, so the
        # stored seqs add up to the acknowledged snapshots exactly.
        rows = requests.get(balancer.url + "/v1/instance/list", timeout=60).json()
        assert len(rows) == INSTANCES
        acknowledged = summary["requests"]["snapshot"]["acknowledged"]
        assert acknowledged > INSTANCES * (DURATION_S // 2)
        assert sum(row["resource"]["report_seq"] for row in rows) == acknowledged

        # Both web processes served the fleet.
        assert snapshots_served(first) > 0 and snapshots_served(second) > 0

        # The pool summary is the same whichever process computes it.
        def summary_of(server):
            pool = requests.get(server.url + "/debug/pool_resource", timeout=30).json()["pool_resource"]
            return {key: pool[key] for key in ("instances", "load", "utilization", "pool_admission_state")}

        assert summary_of(first) == summary_of(second)
        assert summary_of(first)["instances"]["with_resource"] == INSTANCES

        # One recorder for the pool: the other process's stands by.
        assert wait_for(lambda: "standing by" in first.log_since(0) + second.log_since(0), timeout_s=60,
                        message="one recorder standing by")
        history = requests.get(balancer.url + "/debug/pool_resource/history", params={"range": "15m"},
                               timeout=30).json()["points"]
        stamps = [point["t"] for point in history]
        assert len(stamps) == len(set(stamps))  # never two rows for one tick
    finally:
        balancer.stop()

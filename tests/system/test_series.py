"""The series under ``manage.py up``: the recorder writes them, the read API shows them (SPEC 9)."""

import os
import signal
import subprocess
import sys

import pytest

from tests.factories import make_snapshot
from tests.live import ROOT, wait_for

pytestmark = pytest.mark.live

LIVE_ENV = {"FLEETWATCH_INSTANCE_TTL_S": "3600", "FLEETWATCH_SERIES_INTERVAL_S": "1"}
DEADLINE_S = 90


def report(server, instance_id, cpu, seq):
    reply = server.post("/v1/instance/resource_snapshot", {
        "instance_id": instance_id, "snapshot": make_snapshot(cpu=cpu), "metadata": {"report_seq": seq},
    })
    assert reply.json() == {"ok": True}


def test_it_records_snapshots_into_the_instance_series(servers):
    server = servers(roles="proxy", env=LIVE_ENV).start()
    assert server.post("/v1/instance/register", {"instance_id": "i-1", "host": "10.0.0.1", "port": 8000}).ok
    seen = []
    for seq, cpu in enumerate((11.0, 22.0, 33.0), start=1):
        report(server, "i-1", cpu, seq)

        def recorded(cpu=cpu):
            points = server.get("/v1/instance/history", instance_id="i-1", range="15m")["points"]
            return cpu in [p["cpu_util"] for p in points] and points

        seen = wait_for(recorded, timeout_s=DEADLINE_S, message=f"cpu {cpu} in the series")
    assert [p["cpu_util"] for p in seen] == [11.0, 22.0, 33.0]
    assert [p["t"] for p in seen] == sorted(p["t"] for p in seen)


def test_its_pool_resource_rows_follow_a_changed_pool(servers):
    server = servers(roles="proxy", env=LIVE_ENV).start()

    def newest():
        points = server.get("/debug/pool_resource/history", range="15m")["points"]
        return points[-1] if points else None

    wait_for(lambda: (p := newest()) and p["total"] == 0, timeout_s=DEADLINE_S, message="a row of the empty pool")
    assert server.post("/v1/instance/register", {"instance_id": "i-1", "host": "10.0.0.1", "port": 8000}).ok
    changed_at = server.get("/v1/instance/list")[0]["registered_at"]
    report(server, "i-1", 40.0, 1)
    row = wait_for(lambda: (p := newest()) and p["with_resource"] == 1 and p, timeout_s=DEADLINE_S,
                   message="a row showing the new instance")
    assert row["t"] >= changed_at
    assert (row["alive"], row["total"], row["cpu_avg"], row["pool_admission_state"]) == (1, 1, 40.0, "accepting")
    # The rows come once per interval (the cadence itself is tested with an injected clock).
    points = server.get("/debug/pool_resource/history", range="15m")["points"]
    assert len(points) >= 2


def test_it_runs_one_recorder_per_database(servers, tmp_path):
    server = servers(roles="proxy", env=LIVE_ENV).start()
    # up's recorder holds the lock once it has written a row; a second started before that
    # could win the race instead (either standing by is right, but this test names the second).
    wait_for(lambda: server.get("/debug/pool_resource/history", range="15m")["points"], timeout_s=DEADLINE_S,
             message="up's recorder to write its first row")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DJANGO_SETTINGS"))}
    env.update(server.env())
    log_path = tmp_path / "second-recorder.log"
    with open(log_path, "wb") as log:
        second = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "run_recorder"], cwd=ROOT, env=env,
                                  stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: "standing by" in log_path.read_text(), timeout_s=DEADLINE_S,
                 message="the second recorder to stand by")
        assert second.poll() is None
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(30) == 0

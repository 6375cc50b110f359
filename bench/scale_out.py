"""The production shape, measured: one pool served by several web processes on PostgreSQL.

    .venv/bin/python bench/scale_out.py --database-url postgres://postgres@127.0.0.1:5432/fw_scale \\
        [--instances 2000] [--duration 300] [--seconds 10] [--skip-fleet] [--skip-throughput]

Everything as docs/scale-out.md describes it: Debian's nginx in front,
django-q2 and the rate-limit counters on Redis, every web process a granian
server on the one database, and beside each web process the recorder and a
task cluster, kept single per pool by their lock (a PostgreSQL advisory
lock), as a second ``up`` would start them.

1. Ingest throughput through nginx (wrk at concurrency 16, ~7 KB 8-GPU
   bodies over 1,000 instances) with one and with two web processes, of one
   and of four workers each; the server CPU per request (web processes only).
2. The fleet: the simulator drives ``--instances`` at 1 Hz through nginx for
   ``--duration`` seconds against two web processes. Checked after: zero
   errors, zero acknowledged reports lost (each instance's stored
   ``report_seq`` counts its acknowledged reports, so they add up to the
   simulator's count), the pool summary the same from either process, one
   recorder writing.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import redis
import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    PYTHON,
    Deployment,
    Recorder,
    WebServer,
    register_instances,
    snapshot_body_template,
    wrk,
)
from tests.live import Nginx  # noqa: E402

REDIS_URL = "redis://127.0.0.1:6379/6"
SUMMARY_KEYS = ("instances", "load", "utilization", "pool_admission_state")


class Pool:
    """``processes`` web servers of ``workers`` each behind nginx, with a recorder and a task cluster beside each."""

    def __init__(self, deployment, processes, workers, companions=False):
        self.servers = [WebServer(deployment, workers=workers) for _ in range(processes)]
        self.tmp = Path(tempfile.mkdtemp(prefix="fw-nginx-"))
        self.nginx = Nginx(self.tmp, [f"127.0.0.1:{server.port}" for server in self.servers]).start()
        self.companions = []
        if companions:
            for _ in range(processes):
                self.companions.append(Recorder(deployment))
                self.companions.append(subprocess.Popen([PYTHON, "manage.py", "qcluster"], env=deployment.env,
                                                        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    @property
    def url(self):
        return self.nginx.url

    def cpu_seconds(self):
        return sum(server.cpu_seconds() for server in self.servers)

    def stop(self):
        for companion in self.companions:
            (companion.stop if isinstance(companion, Recorder) else companion.terminate)()
        self.nginx.stop()
        for server in self.servers:
            server.stop()


def throughput(args, deployment, token):
    print("ingest through nginx (wrk -t2 -c16, ~7 KB bodies over 1,000 instances)")
    body = snapshot_body_template()
    rows = []
    for processes, workers in ((1, 1), (2, 1), (1, 4), (2, 4)):
        pool = Pool(deployment, processes, workers)
        try:
            if not rows:
                register_instances(pool.url, 1000, token)
            wrk(pool.url, "POST", "/v1/instance/resource_snapshot", 3, body=body, token=token)  # warm-up
            before = pool.cpu_seconds()
            result = wrk(pool.url, "POST", "/v1/instance/resource_snapshot", args.seconds, body=body, token=token)
            cpu_ms = (pool.cpu_seconds() - before) * 1000 / max(result["requests"], 1)
        finally:
            pool.stop()
        errors = result["non_2xx"] + result["socket_errors"]
        rows.append((processes, workers, result["rps"], result["p50_us"] / 1000, result["p99_us"] / 1000, cpu_ms, errors))
        print(f"  {processes} web process(es) × {workers} worker(s): {result['rps']:7,.0f} req/s   "
              f"p50 {result['p50_us'] / 1000:6.1f} ms   p99 {result['p99_us'] / 1000:6.1f} ms   "
              f"{cpu_ms:.2f} ms CPU/request   errors {errors}", flush=True)
    return rows


def fleet(args, deployment, token):
    print(f"fleet: {args.instances} instances at 1 Hz for {args.duration} s through nginx, "
          "2 web processes (2 workers each), 2 recorders and 2 task clusters", flush=True)
    pool = Pool(deployment, 2, 2, companions=True)
    summary_path = deployment.workdir / "fleet.json"
    try:
        run = subprocess.run(
            [PYTHON, "manage.py", "simulate_fleet", "--proxy-url", pool.url, "--instances", str(args.instances),
             "--interval-ms", "1000", "--duration", str(args.duration), "--calm", "--processes", "2",
             "--no-unregister", "--no-progress", "--id-prefix", "fleet", "--json", str(summary_path),
             "--token", token],
            env=deployment.env, cwd=ROOT, capture_output=True, text=True,
        )
        print(run.stdout[-4000:])
        summary = json.loads(summary_path.read_text())
        reader = deployment.token("read", "scale-reader")
        headers = {"Authorization": f"Bearer {reader}"}
        rows = requests.get(pool.url + "/v1/instance/list", headers=headers, timeout=120).json()
        stored = sum(row["resource"]["report_seq"] or 0 for row in rows if row["instance_id"].startswith("fleet-"))
        acknowledged = summary["requests"]["snapshot"]["acknowledged"]
        pools = [{key: requests.get(server.url + "/debug/pool_resource", headers=headers, timeout=60)
                  .json()["pool_resource"][key] for key in SUMMARY_KEYS} for server in pool.servers]
        # Two recorders run; the advisory lock lets one write, the other stands by.
        locks = deployment.python(
            "import django; django.setup()\n"
            "from django.db import connection\n"
            "from proxy_app.models import PoolResource\n"
            "with connection.cursor() as cursor:\n"
            "    cursor.execute(\"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted\")\n"
            "    print(cursor.fetchone()[0], PoolResource.objects.count())\n"
        ).split()
    finally:
        pool.stop()
    print(f"  errors {summary['errors']} {summary['errors_by_kind']}")
    print(f"  snapshots acknowledged {acknowledged:,}; sum of stored report_seq {stored:,} "
          f"({'none lost' if stored == acknowledged else 'MISMATCH'})")
    print(f"  achieved {summary['rate']['achieved_per_s']:.0f}/s of {summary['rate']['target_per_s']:.0f}/s target "
          f"(acknowledged of due {summary['rate']['acknowledged_of_due']:.2f}); latency p50 "
          f"{summary['latency_ms']['p50']:.0f} ms, p99 {summary['latency_ms']['p99']:.0f} ms")
    print(f"  pool summary from process 1 == process 2: {pools[0] == pools[1]}")
    print(f"  advisory locks held: {locks[0]} (2 recorders running, one holds its lock); pool series rows {locks[1]}")
    print(f"  client CPU: see the simulator's summary above; machine load average "
          f"{' '.join(f'{x:.1f}' for x in psutil.getloadavg())}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", required=True, help="a PostgreSQL database (flushed first)")
    parser.add_argument("--instances", type=int, default=2000)
    parser.add_argument("--duration", type=int, default=300)
    parser.add_argument("--seconds", type=int, default=10, help="length of each wrk run")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-fleet", action="store_true")
    args = parser.parse_args()
    redis.Redis.from_url(REDIS_URL).flushdb()
    deployment = Deployment(args.database_url, roles="proxy", FLEETWATCH_REDIS_URL=REDIS_URL,
                            FLEETWATCH_PROXY_ID="pool-scale", FLEETWATCH_INSTANCE_TTL_S=3600)
    try:
        token = deployment.token("instance", "scale")
        if not args.skip_throughput:
            throughput(args, deployment, token)
        if not args.skip_fleet:
            fleet(args, deployment, token)
    finally:
        deployment.cleanup()


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""The pool dashboard at 10 and at 10,000 instances: does paging keep it as fast?

Runs the real deployment (gunicorn sync workers, persistent DB connections,
whitenoise) on a fresh database with FLEETWATCH_AUTH off, seeds the pool
straight through the ORM (varied figures, 5 % of the instances stale), and
times, one request at a time, the pages and fragments a browser asks for:
the median, 90th percentile and worst of ``--rounds`` requests after a
warm-up. The series recorder runs beside the web server as under ``up``,
so the summary cards read its newest pool summary; ``--no-recorder``
measures the slow path, where each request computes the summary with SQL
aggregates over the whole pool.

    .venv/bin/python bench/pages.py [--rounds 30] [--sizes 10,10000] [--no-recorder] [--database-url URL]

Target: /pool/ and its rows fragment under 100 ms (median) at 10,000 instances.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.ingest import free_port, wait_for_server  # noqa: E402

TARGET_MS = 100.0
# What a browser on /pool/ and /pool/instances/<id>/ asks for, and a few harder lists.
PATHS = [
    ("/pool/", True),
    ("/pool/rows", True),
    ("/pool/summary", False),
    ("/pool/rows?sort=cpu", False),
    ("/pool/rows?per_page=100", False),
    ("/pool/rows?status=stale&sort=gpu&desc=1", False),
    ("/pool/rows?q=pool-99", False),
    ("/pool/rows?sort=memory&page=150", False),
    ("/pool/rows?view=cards&per_page=200", False),
    ("/pool/instances/pool-1/", False),
    ("/pool/instances/pool-1/live", False),
]

SEED = """
import django, time
django.setup()
from controlplane.admission import Admission
from proxy_app.models import Instance, InstanceResource
from proxy_app.normalise import normalise_snapshot
from bench.ingest import realistic_snapshot
count = {count}
now = time.time()
base = normalise_snapshot(realistic_snapshot(), {{"report_seq": 1}}, now)
raw = base.pop("raw_resource")
states = [Admission.ACCEPTING] * 8 + [Admission.DEGRADED, Admission.REJECTING]
Instance.objects.all().delete()
Instance.objects.bulk_create([Instance(instance_id=f"pool-{{i}}", host=f"10.9.{{i // 250}}.{{i % 250}}",
    port=8000, registered_at=now - 3600, last_seen_at=now - (120 if i % 20 == 0 else i % 5),
    inflight=i % 7, qps_1m=1.5) for i in range(count)], batch_size=1000)
InstanceResource.objects.bulk_create([InstanceResource(instance_id=f"pool-{{i}}", has_raw_resource=True, **{{
    **base, "cpu_util": float(i * 37 % 100), "gpu_util_avg": float(i * 53 % 100),
    "memory_free_ratio": (i * 29 % 100) / 100, "admission_state": states[i % 10],
    "resource_reported_at": now - (i % 5)}}, raw_resource=raw) for i in range(count)], batch_size=500)
"""


def seed(env, count):
    subprocess.run([sys.executable, "-c", SEED.format(count=count)], env=env, cwd=ROOT, check=True)


def wait_for_summary(session, url, size, timeout_s=60):
    """Until the recorder has summarised the freshly seeded pool."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        points = session.get(url + "/pool/series?range=15m", timeout=30).json()
        if points["total"] and points["total"][-1] == size:
            return
        time.sleep(0.5)
    raise SystemExit("the recorder did not summarise the seeded pool")


def time_path(session, url, rounds):
    for _ in range(3):  # warm-up: connections, caches, compiled templates
        session.get(url, timeout=30).raise_for_status()
    timings = []
    for _ in range(rounds):
        started = time.perf_counter()
        response = session.get(url, timeout=30)
        timings.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
    timings.sort()
    return {
        "median": statistics.median(timings),
        "p90": timings[int(len(timings) * 0.9) - 1],
        "worst": timings[-1],
        "bytes": len(response.content),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30, help="timed requests per path (default 30)")
    parser.add_argument("--sizes", default="10,10000", help="pool sizes to seed, comma-separated")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument("--no-recorder", action="store_true",
                        help="do not run the series recorder: every request aggregates the pool itself")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]

    workdir = Path(tempfile.mkdtemp(prefix="fw-bench-pages-"))
    env = dict(os.environ)
    env.update({
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
        "FLEETWATCH_AUTH": "off",
        "FLEETWATCH_VAR_DIR": str(workdir),
        "DATABASE_URL": args.database_url or f"sqlite:///{workdir}/bench.sqlite3",
        "PYTHONPATH": str(ROOT),
    })
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], env=env, cwd=ROOT, check=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "controlplane.wsgi:application", "--bind", f"127.0.0.1:{port}",
         "--workers", str(args.workers), "--worker-class", "sync", "--log-level", "warning"],
        env=env, cwd=ROOT,
    )
    recorder = None
    results = {}
    try:
        wait_for_server(url, server)
        if not args.no_recorder:
            recorder = subprocess.Popen([sys.executable, "manage.py", "run_recorder"], env=env, cwd=ROOT)
        session = requests.Session()
        print(f"database {env['DATABASE_URL'].split(':')[0]}; {args.workers} gunicorn sync workers; "
              f"{args.rounds} sequential requests per path after 3 warm-up ones; "
              + ("no recorder: the summary aggregated per request" if args.no_recorder
                 else "recorder running: the summary read from its newest row"))
        for size in sizes:
            seed(env, size)
            if recorder is not None:
                wait_for_summary(session, url, size)
            print(f"\n{size:,} instances")
            print(f"  {'path':44s} {'median':>8s} {'p90':>8s} {'worst':>8s} {'size':>9s}")
            for path, targeted in PATHS:
                figures = time_path(session, url + path, args.rounds)
                results[(size, path)] = figures
                print(f"  {path:44s} {figures['median']:6.1f}ms {figures['p90']:6.1f}ms {figures['worst']:6.1f}ms "
                      f"{figures['bytes'] / 1024:7.1f}KB")
        largest = max(sizes)
        print()
        for path, targeted in PATHS:
            if targeted:
                median = results[(largest, path)]["median"]
                verdict = "PASS" if median < TARGET_MS else "FAIL"
                print(f"{path} at {largest:,} instances: median {median:.1f} ms (target < {TARGET_MS:.0f} ms) {verdict}")
    finally:
        if recorder is not None:
            recorder.terminate()
            recorder.wait(15)
        server.terminate()
        server.wait(15)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()

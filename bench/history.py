#!/usr/bin/env python
"""History at scale: disk per instance-day, and the read time of every history endpoint.

Seeds a fresh database with a full day of series for N instances (default
10,000): 24 h of minute rollups and 15 min of full-resolution samples per
instance, the pool's own series and one proxy's series at the Scheduler, all
generated inside the database. Reports what each table takes per row and per
instance for a day, then serves the real deployment (gunicorn) and times
each history endpoint and range (median and worst of --requests reads).

    .venv/bin/python bench/history.py [--instances 10000] [--requests 30] [--database-url URL]
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
TARGET_MS = 50.0
RANGES = ("15m", "1h", "6h", "24h")
MINUTES = 24 * 60
FULL_S = 15 * 60

SEED = r"""
import os, sys, time
import django
django.setup()
from django.db import connection, transaction
from proxy_app.models import Instance, InstanceMinute, InstanceSample, PoolResource, PoolResourceMinute
from scheduler_app.models import PoolResourceSample, Proxy, ProxyPoolMinute

N = int(sys.argv[1])
MINUTES, FULL_S = 24 * 60, 15 * 60
now = float(sys.argv[2])
start = (int(now) // 60) * 60 - 24 * 3600
pg = connection.vendor == "postgresql"
q = connection.ops.quote_name


def series(limit):
    if pg:
        return f"generate_series(0, {limit - 1}) AS k(k)"
    return f"(WITH RECURSIVE s(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM s WHERE k < {limit - 1}) SELECT k FROM s) AS k"


def stamp(expr):
    return f"to_timestamp({expr})" if pg else f"strftime('%Y-%m-%d %H:%M:%S', {expr}, 'unixepoch')"


def size():
    with connection.cursor() as cursor:
        if pg:
            cursor.execute("SELECT pg_database_size(current_database())")
            return cursor.fetchone()[0]
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        cursor.execute("PRAGMA page_count")
        pages = cursor.fetchone()[0]
        cursor.execute("PRAGMA freelist_count")
        free = cursor.fetchone()[0]
        cursor.execute("PRAGMA page_size")
        return (pages - free) * cursor.fetchone()[0]


def figure(name, index):
    # Plausible, varying figures: a slow wave per instance, a few nulls.
    if name.endswith("ratio"):
        return f"(((k + {index}) % 97) / 100.0)"
    if name.startswith("network"):
        return f"(((k * 7 + {index}) % 1000) * 1.5)"
    return f"CASE WHEN (k + {index}) % 50 = 0 THEN NULL ELSE ((k * 3 + {index}) % 100) * 1.0 END"


def minute_columns(model, key_expr, index_expr):
    names, values = [], []
    if key_expr:
        names.append("instance_id" if model is InstanceMinute else "proxy_id")
        values.append(key_expr)
    names += ["minute", "samples"]
    values += [stamp(f"{start} + k * 60"), "60"]
    for i, name in enumerate(model.FIGURES):
        for agg in ("min", "avg", "max"):
            names.append(f"{name}_{agg}")
            values.append(figure(name, f"{index_expr} + {i}"))
    names.append(model.ADMISSION)
    values.append("CASE WHEN k % 17 = 0 THEN 'degraded' ELSE 'accepting' END")
    return names, values


def insert(model, names, values, source):
    sql = (f"INSERT INTO {q(model._meta.db_table)} ({', '.join(q(n) for n in names)}) "
           f"SELECT {', '.join(values)} FROM {source}")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql)


results = []


def stage(label, rows, work):
    before = size()
    started = time.perf_counter()
    work()
    seconds = time.perf_counter() - started
    results.append((label, rows, size() - before, seconds))


Instance.objects.bulk_create([Instance(instance_id=f"pool-{i}", host="10.9.0.1", port=1 + i % 65000,
                                       registered_at=now, last_seen_at=now) for i in range(N)], batch_size=2000)
instances = f"(SELECT {q('instance_id')} AS instance_id, ROW_NUMBER() OVER (ORDER BY {q('instance_id')}) AS n FROM {q(Instance._meta.db_table)}) AS i"

names, values = minute_columns(InstanceMinute, "i.instance_id", "i.n")
stage("instance minute rollups (24 h)", N * MINUTES,
      lambda: insert(InstanceMinute, names, values, f"{instances} CROSS JOIN {series(MINUTES)}"))

sample_names = ["instance_id", "t", *InstanceSample.FIGURES, "admission_state"]
sample_values = ["i.instance_id", f"{now - FULL_S} + k", *(figure(n, "i.n") for n in InstanceSample.FIGURES), "'accepting'"]
stage("instance samples (15 min at 1 s)", N * FULL_S,
      lambda: insert(InstanceSample, sample_names, sample_values, f"{instances} CROSS JOIN {series(FULL_S)}"))

pool_names, pool_values = minute_columns(PoolResourceMinute, None, "1")
stage("pool minute rollups (24 h)", MINUTES, lambda: insert(PoolResourceMinute, pool_names, pool_values, series(MINUTES)))
point_names = ["t", *PoolResource.FIGURES, "pool_admission_state", "summary"]
point_values = [f"{now - FULL_S} + k", *(figure(n, 1) for n in PoolResource.FIGURES), "'accepting'", "'{}'"]
stage("pool resource rows (15 min at 1 s)", FULL_S,
      lambda: insert(PoolResource, point_names, point_values, series(FULL_S)))

Proxy.objects.create(proxy_id="pxy-bench", host="10.0.0.1", port=8002, registered_at=now, last_seen_at=now)
proxy_names, proxy_values = minute_columns(ProxyPoolMinute, "'pxy-bench'", "1")
stage("scheduler minute rollups (24 h, one proxy)", MINUTES,
      lambda: insert(ProxyPoolMinute, proxy_names, proxy_values, series(MINUTES)))
sample_point_values = ["'pxy-bench'", *point_values]
stage("scheduler samples (15 min at 5 s, one proxy)", FULL_S // 5,
      lambda: insert(PoolResourceSample, ["proxy_id", *point_names],
                     [v.replace("+ k", "+ k * 5") for v in sample_point_values], series(FULL_S // 5)))

for label, rows, grown, seconds in results:
    print(f"SEED {label}|{rows}|{grown}|{seconds:.1f}")
"""


def free_port():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_server(url, process, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit("gunicorn exited early")
        try:
            if requests.get(url + "/healthz", timeout=1).ok:
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise SystemExit("gunicorn did not start")


def time_reads(url, path, params, count):
    session = requests.Session()
    session.get(url + path, params=params, timeout=30).raise_for_status()
    timings = []
    for _ in range(count):
        started = time.perf_counter()
        response = session.get(url + path, params=params, timeout=30)
        timings.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
    return statistics.median(timings), max(timings), len(response.json()["points"])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=30, help="reads per endpoint and range")
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="fw-bench-history-"))
    env = dict(os.environ)
    env.update({
        "DJANGO_SETTINGS_MODULE": "bench.settings",
        "FLEETWATCH_ROLES": "proxy,scheduler",
        "FLEETWATCH_VAR_DIR": str(workdir),
        "DATABASE_URL": args.database_url or f"sqlite:///{workdir}/bench.sqlite3",
        "PYTHONPATH": str(ROOT),
    })
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], env=env, cwd=ROOT, check=True)
    if args.database_url:
        subprocess.run([sys.executable, "manage.py", "flush", "--no-input", "-v0"], env=env, cwd=ROOT, check=True)
    now = time.time()
    seeding = subprocess.run([sys.executable, "-c", SEED, str(args.instances), str(now)], env=env, cwd=ROOT,
                             capture_output=True, text=True)
    if seeding.returncode:
        raise SystemExit(f"seeding failed:\n{seeding.stderr[-3000:]}")
    seeded = seeding.stdout
    database = env["DATABASE_URL"].split(":")[0]
    print(f"database {database}; {args.instances} instances; one day of series generated in the database")
    per_instance_day = 0
    for line in seeded.splitlines():
        if not line.startswith("SEED "):
            continue
        label, rows, grown, seconds = line[5:].split("|")
        rows, grown = int(rows), int(grown)
        print(f"  {label:45s} {rows:>11,} rows  {grown / 2**20:9.1f} MiB  {grown / max(rows, 1):6.1f} B/row  "
              f"(seeded in {seconds} s)")
        if label.startswith("instance"):
            per_instance_day += grown / args.instances
    print(f"  per instance, for the default windows (24 h of minutes + 15 min at 1 s): "
          f"{per_instance_day / 2**20:.2f} MiB")

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "bench.wsgi:application", "--bind", f"127.0.0.1:{port}",
         "--workers", str(args.workers), "--worker-class", "sync", "--log-level", "warning"],
        env=env, cwd=ROOT,
    )
    try:
        wait_for_server(url, server)
        endpoints = (
            ("/v1/instance/history", {"instance_id": f"pool-{args.instances // 2}"}),
            ("/debug/pool_resource/history", {}),
            ("/v1/proxy/history", {"proxy_id": "pxy-bench"}),
        )
        worst_median = 0.0
        for path, params in endpoints:
            for range_name in RANGES:
                median, worst, points = time_reads(url, path, {**params, "range": range_name}, args.requests)
                worst_median = max(worst_median, median)
                print(f"  GET {path:30s} range={range_name:4s} {points:5d} points   median {median:6.1f} ms   "
                      f"worst {worst:6.1f} ms")
        verdict = "PASS" if worst_median < TARGET_MS else "FAIL"
        print(f"slowest median read {worst_median:.1f} ms (target < {TARGET_MS:.0f} ms) {verdict}")
    finally:
        server.terminate()
        server.wait(15)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Every figure of issue 12's table, measured side by side in one run.

    .venv/bin/python bench/run.py [--database-url URL] [--server granian|gunicorn] [--workers N]
                                  [--seconds 10] [--rounds 3] [--pool-size 10000] [--gpus 8]
                                  [--engines 2] [--skip-history] [--only-engines]

One fresh deployment (SQLite by default), its web server run as ``up`` runs
it (granian, a worker per CPU), wrk at concurrency 16 from this machine:

1. snapshot ingest (auth on, an ``instance`` token, ~7 KB bodies of 8-GPU
   hosts by default, ~1.8 KB as in the issue's run with ``--gpus 1``, cycling
   over 1,000 instances) against the same server's ``/healthz``, rounds
   alternating; the server's CPU time per request (all its processes);
   the same ingest through Django alone (``controlplane.wsgi:django_application``, a
   third server, alternating) against the hot lane ``up`` serves, and against the
   original's figure estimated from this ``/healthz`` (``ORIGINAL_PER_HEALTHZ``);
2. heartbeats; ingest with auth off (a second server on the same database,
   alternated with the first); ingest with the series recorder running;
   ingest of snapshots listing ``--engines`` serving engines (SPEC 13)
   against the same snapshots without, alternated;
3. at ``--pool-size`` reporting instances: ``GET /debug/pool_resource`` at
   concurrency 4 (fresh on every read), with one client, and with one client
   while 1,000 snapshots/s arrive; the full ``/v1/instance/list``, one
   page of 100 at offset 5,000, 1,000 unregisters sent at once (``bench/unregister.py``),
   the pool page and its rows fragment;
4. history: 24 h of minute rollups and 15 min of full resolution for every
   instance of the pool (generated in the database), the read time of each
   history endpoint, and the disk they take per instance-day.

Targets are issue 12's: ingest ≥ 0.6 × /healthz, ≤ 0.25 ms server CPU per
ingest; issue 23's for the reads (the original cannot run here, so its
figures from that issue's run): pool_resource p50 ≤ 0.05 × the original's
(≤ 17.2 ms at c4, ≤ 4.6 ms one client), the full list ≤ 0.5 × (≤ 0.205 s); a page
≤ 15 ms, history reads < 50 ms, pool page < 100 ms, auth within 10 %.
"""

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    Deployment,
    Recorder,
    WebServer,
    measured,
    register_instances,
    seed_pool,
    snapshot_body_template,
    timed_gets,
    wrk,
)
from bench.history_seed import seed_history  # noqa: E402
from bench.placement import ingest  # noqa: E402
from bench.unregister import mass_unregister  # noqa: E402

INGEST_PATH = "/v1/instance/resource_snapshot"
# The original's ingest against Fleetwatch's own /healthz in the side-by-side run (issue 23:
# 4,160-4,494 against 5,097-6,123 req/s, midpoints): the original cannot run here, so its figure
# today is estimated as this share of the same server's /healthz.
ORIGINAL_PER_HEALTHZ = 4327 / 5610
# Issue 23's reads of the original at 10,000 instances, and its targets: pool_resource fresh p50 ≤ 0.05 ×
# (345-391 ms at c4, 92-100 ms one client), the full list ≤ 0.5 × (409-550 ms); the low end of each range.
POOL_C4_TARGET_MS = 0.05 * 345
POOL_ONE_TARGET_MS = 0.05 * 92
FULL_LIST_TARGET_S = 0.5 * 0.409
HEARTBEAT_BODY = '{"instance_id": "__ID__", "inflight": 3, "qps_1m": 1.5}'
rows = []


def row(what, figure, target=None, ok=None):
    verdict = "" if ok is None else ("PASS" if ok else "FAIL")
    rows.append((what, figure, target or "", verdict))
    print(f"  {what:58s} {figure:>22s}  {target or '':>16s}  {verdict}", flush=True)


def throughput(args, on, off, token):
    """Ingest against /healthz on the auth-on server, and auth off on the second server, alternating."""
    body = snapshot_body_template(args.gpus)
    wrk(on.url, "GET", "/healthz", 2)
    healthz, ingest, ingest_off, beats = [], [], [], []
    for round_no in range(1, args.rounds + 1):
        healthz.append(measured(on, "GET", "/healthz", args.seconds))
        # Auth on and off take turns going first: whichever follows the other
        # meets a database a few thousand reports further on.
        if round_no % 2:
            ingest.append(measured(on, "POST", INGEST_PATH, args.seconds, body=body, token=token))
            ingest_off.append(measured(off, "POST", INGEST_PATH, args.seconds, body=body))
        else:
            ingest_off.append(measured(off, "POST", INGEST_PATH, args.seconds, body=body))
            ingest.append(measured(on, "POST", INGEST_PATH, args.seconds, body=body, token=token))
        beats.append(measured(on, "POST", "/v1/instance/heartbeat", args.seconds, body=HEARTBEAT_BODY, token=token))
        print(f"  round {round_no}: /healthz {healthz[-1]['rps']:.0f}/s ({healthz[-1]['cpu_ms']:.3f} ms CPU), "
              f"ingest {ingest[-1]['rps']:.0f}/s ({ingest[-1]['cpu_ms']:.3f} ms), auth off {ingest_off[-1]['rps']:.0f}/s, "
              f"heartbeats {beats[-1]['rps']:.0f}/s", flush=True)
        for result in (ingest[-1], ingest_off[-1], beats[-1]):
            if result["non_2xx"] or result["socket_errors"]:
                raise SystemExit(f"non-2xx or socket errors during the load: {result}")
    median = lambda runs, key="rps": statistics.median(r[key] for r in runs)  # noqa: E731
    ratio = statistics.median(i["rps"] / h["rps"] for i, h in zip(ingest, healthz))
    row("/healthz (the same server)", f"{median(healthz):,.0f} req/s")
    row("snapshot ingest (auth on)", f"{median(ingest):,.0f} req/s")
    row("  ingest / /healthz (median of rounds)", f"{ratio:.2f}", "≥ 0.60", ratio >= 0.6)
    original = ratio / ORIGINAL_PER_HEALTHZ
    row("  ingest / the original's (estimated, ORIGINAL_PER_HEALTHZ)", f"{original:.2f}", "≥ 1.50", original >= 1.5)
    cpu = median(ingest, "cpu_ms")
    row("server CPU per ingest", f"{cpu:.3f} ms", "≤ 0.25 ms", cpu <= 0.25)
    row("server CPU per /healthz", f"{median(healthz, 'cpu_ms'):.3f} ms")
    auth_ratio = statistics.median(i["rps"] / o["rps"] for i, o in zip(ingest, ingest_off))
    row("ingest auth on / auth off", f"{auth_ratio:.2f}", "≥ 0.90", auth_ratio >= 0.9)
    row("heartbeats (auth on)", f"{median(beats):,.0f} req/s")
    latency = statistics.median(i["p99_us"] for i in ingest) / 1000
    row("ingest p50 / p99 latency at c16", f"{median(ingest, 'p50_us') / 1000:.1f} / {latency:.1f} ms")
    return median(ingest)


def lane_against_django(args, deployment, on, token):
    """Ingest through the hot lane (what up serves) against the same through Django alone, alternating."""
    django = WebServer(deployment, args.server, args.workers, args.threads, app="controlplane.wsgi:django_application")
    body, lane, plain = snapshot_body_template(args.gpus), [], []
    try:
        for round_no in range(1, args.rounds + 1):
            pair = [(lane, on), (plain, django)]
            for runs, server in pair if round_no % 2 else reversed(pair):
                runs.append(measured(server, "POST", INGEST_PATH, args.seconds, body=body, token=token))
    finally:
        django.stop()
    ratio = statistics.median(a["rps"] / b["rps"] for a, b in zip(lane, plain))
    row("ingest through Django alone (no hot lane)", f"{statistics.median(r['rps'] for r in plain):,.0f} req/s")
    row("  ingest hot lane / Django alone", f"{ratio:.2f}")
    cpu = statistics.median(r["cpu_ms"] for r in plain)
    row("  server CPU per ingest through Django alone", f"{cpu:.3f} ms")


def with_recorder(args, deployment, on, token, without):
    recorder = Recorder(deployment)
    try:
        runs = [measured(on, "POST", INGEST_PATH, args.seconds, body=snapshot_body_template(args.gpus), token=token)
                for _ in range(args.rounds)]
    finally:
        recorder.stop()
    rps = statistics.median(r["rps"] for r in runs)
    row("ingest with the series recorder running", f"{rps:,.0f} req/s ({rps / without:.2f}×)", "≥ 0.90×",
        rps / without >= 0.9)


def with_engines(args, on, token):
    """Ingest of snapshots listing the host's engines against the same snapshots without, rounds alternating."""
    plain, listed = snapshot_body_template(args.gpus), snapshot_body_template(args.gpus, args.engines)
    without, with_them = [], []
    for round_no in range(1, args.rounds + 1):
        pair = [(without, plain), (with_them, listed)]
        for runs, body in pair if round_no % 2 else reversed(pair):
            runs.append(measured(on, "POST", INGEST_PATH, args.seconds, body=body, token=token))
    ratio = statistics.median(w["rps"] / o["rps"] for w, o in zip(with_them, without))
    size = len(listed) - len(plain)
    row(f"ingest with {args.engines} engines in the snapshot (+{size} bytes) / without", f"{ratio:.2f}", "≥ 0.90",
        ratio >= 0.9)
    cpu = statistics.median(r["cpu_ms"] for r in with_them) - statistics.median(r["cpu_ms"] for r in without)
    row("  server CPU the engines add per ingest", f"{cpu:+.3f} ms")


def curl_seconds(url, count, token):
    """Median seconds curl takes to fetch ``url`` whole (a client that costs the figure nothing)."""
    times = []
    for _ in range(count + 1):
        result = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{time_total}", "-H",
                                 f"Authorization: Bearer {token}", url], capture_output=True, text=True, check=True)
        times.append(float(result.stdout))
    return statistics.median(times[1:])


def while_ingesting(url, token, pool_size, measure, rate=1000.0):
    """``measure()`` while a thread sends ``rate`` snapshots a second over the seeded pool (``pool-N``)."""
    stop = threading.Event()
    feeder = threading.Thread(target=ingest, args=(url, token, pool_size, rate, stop), kwargs={"prefix": "pool-"},
                              daemon=True)
    feeder.start()
    try:
        time.sleep(1)  # the board's overlap fills with moving contacts
        return measure()
    finally:
        stop.set()
        feeder.join()


def pool_reads(args, deployment, on, off, reader, token):
    seed_pool(deployment, args.pool_size, args.gpus)
    size = f"{args.pool_size:,}"
    result = wrk(on.url, "GET", "/debug/pool_resource", args.seconds, token=reader, threads=1, connections=4)
    p50 = result["p50_us"] / 1000
    row(f"GET /debug/pool_resource, {size} instances, c4: p50", f"{p50:.1f} ms", f"≤ {POOL_C4_TARGET_MS:.1f} ms",
        p50 <= POOL_C4_TARGET_MS)
    alone = timed_gets(on.url, "/debug/pool_resource", 30, token=reader)["p50"]
    row("  the same, one client: p50", f"{alone:.1f} ms", f"≤ {POOL_ONE_TARGET_MS:.1f} ms", alone <= POOL_ONE_TARGET_MS)
    busy = while_ingesting(on.url, token, args.pool_size,
                           lambda: timed_gets(on.url, "/debug/pool_resource", 30, token=reader)["p50"])
    row("  the same, one client, while 1,000 snapshots/s arrive: p50", f"{busy:.1f} ms")
    full_path = "/v1/instance/list?include_dead=true"
    full = curl_seconds(on.url + full_path, 5, reader)
    size_mb = len(requests.get(on.url + full_path, headers={"Authorization": f"Bearer {reader}"},
                               timeout=120).content) / 2**20
    row(f"full GET /v1/instance/list, {size} instances ({size_mb:.0f} MB), curl", f"{full:.3f} s",
        f"≤ {FULL_LIST_TARGET_S:.3f} s", full <= FULL_LIST_TARGET_S)
    in_python = timed_gets(on.url, full_path, 5, token=reader)["p50"] / 1000
    row("  the same read by Python requests (its own decoding included)", f"{in_python:.2f} s")
    page = timed_gets(on.url, "/v1/instance/list?include_dead=true&limit=100&offset=5000", 30, token=reader)
    row("one page of 100 at offset 5,000", f"{page['p50']:.1f} ms", "≤ 15 ms", page["p50"] <= 15)
    leaving = mass_unregister(on.url, token)
    row(f"1,000 unregisters at once (64 connections), {size} instances: p50", f"{leaving['p50_ms']:.0f} ms "
        f"(p99 {leaving['p99_ms']:.0f} ms, {leaving['total_s']:.2f} s in all)", "≤ 100 ms", leaving["p50_ms"] <= 100)
    recorder = Recorder(deployment)  # the pages read its newest pool summary, as under up
    try:
        for path in ("/pool/", "/pool/rows", "/pool/rows?sort=cpu&page=150"):
            timing = timed_gets(off.url, path, 30)
            row(f"dashboard {path}, {size} instances", f"{timing['p50']:.1f} ms", "< 100 ms", timing["p50"] < 100)
    finally:
        recorder.stop()


def history_reads(args, deployment, on, reader):
    disk = seed_history(deployment, args.pool_size)
    for label, per_instance_day in disk:
        row(f"disk: {label}", f"{per_instance_day / 1024:.0f} KiB/instance")
    total = sum(figure for _, figure in disk)
    row("disk per instance for the default windows", f"{total / 2**20:.2f} MiB")
    middle = f"pool-{args.pool_size // 2}"
    for path, params in (("/v1/instance/history", f"instance_id={middle}&"),
                         ("/debug/pool_resource/history", ""), ("/v1/proxy/history", "proxy_id=pxy-bench&")):
        for range_name in ("15m", "24h"):
            timing = timed_gets(on.url, f"{path}?{params}range={range_name}", 20, token=reader)
            row(f"GET {path} range={range_name}", f"{timing['p50']:.1f} ms", "< 50 ms", timing["p50"] < 50)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument("--server", choices=("granian", "gunicorn"), default="granian")
    parser.add_argument("--workers", type=int, default=None, help="default: one per CPU (as up)")
    parser.add_argument("--threads", type=int, help="granian blocking threads per worker (default: as up runs it)")
    parser.add_argument("--seconds", type=int, default=10, help="seconds per wrk run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pool-size", type=int, default=10_000)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per snapshot: 8 ≈ 7 KB, 1 ≈ 1.8 KB")
    parser.add_argument("--engines", type=int, default=2, help="engines per snapshot in the engines row (SPEC 13)")
    parser.add_argument("--skip-history", action="store_true", help="leave out the day of history (slow to seed)")
    parser.add_argument("--only-engines", action="store_true", help="only the ingest rows and the engines row")
    args = parser.parse_args()

    deployment = Deployment(args.database_url, FLEETWATCH_RATE_LIMIT=0)
    token = deployment.token("instance", "bench-agents")
    reader = deployment.token("read", "bench-reader")
    on = WebServer(deployment, args.server, args.workers, args.threads)
    off = WebServer(deployment, args.server, args.workers, args.threads, env={"FLEETWATCH_AUTH": "off"})
    try:
        print(f"database {deployment.vendor}; {on.label}; wrk -t2 -c16, {args.seconds} s runs, "
              f"{args.rounds} rounds; {args.gpus}-GPU snapshots", flush=True)
        register_instances(on.url, 1000, token)
        ingest = throughput(args, on, off, token)
        lane_against_django(args, deployment, on, token)
        with_recorder(args, deployment, on, token, ingest)
        with_engines(args, on, token)
        if not args.only_engines:
            pool_reads(args, deployment, on, off, reader, token)
        if not (args.skip_history or args.only_engines):
            history_reads(args, deployment, on, reader)
    finally:
        on.stop()
        off.stop()
        deployment.cleanup()
    print("\n| what | measured | target | verdict |\n|---|---|---|---|")
    for what, figure, target, verdict in rows:
        print(f"| {what.strip()} | {figure} | {target} | {verdict} |")


if __name__ == "__main__":
    main()

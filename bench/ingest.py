#!/usr/bin/env python
"""Snapshot ingest against a bare Django view, and pool_resource at 10,000 instances.

Runs the real deployment (gunicorn sync workers, persistent DB connections)
on a fresh database, drives it with wrk at concurrency 16 from this machine,
and prints throughput, p50/p99 latency and the ingest/bare ratio measured in
the same run, and ingest again with the series recorder running beside it
(the cost of SPEC 9's history on the ingest path). Then seeds 10,000 instances with resources and times
GET /debug/pool_resource.

    .venv/bin/python bench/ingest.py [--seconds 10] [--rounds 3] [--workers 4] [--database-url URL]

Needs wrk (Debian: apt-get install wrk).
"""

import argparse
import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CONCURRENCY = 16
TARGET_RATIO = 1 / 3
POOL_TARGET_MS = 50.0
RECORDER_SLOWDOWN = 0.10

WRK_SCRIPT = r"""
local per_thread = __PER_THREAD__
local template = __TEMPLATE__
local threads = 0
local seq = 0

setup = function(thread)
  thread:set("tid", threads)
  threads = threads + 1
end

request = function()
  seq = seq + 1
  local id = "bench-" .. (tid * per_thread + (seq % per_thread))
  local body = template:gsub("__ID__", id):gsub("__SEQ__", tostring(seq))
  return wrk.format(__METHOD__, __PATH__, {["Content-Type"] = "application/json"}, body)
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "BENCH_JSON {\"requests\": %d, \"duration_us\": %d, \"socket_errors\": %d, \"non_2xx\": %d, " ..
    "\"p50_us\": %d, \"p99_us\": %d}\n",
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(99)))
end
"""


def realistic_snapshot(gpus=8, cores=32):
    """About what an 8-GPU host's agent sends (≈5 KB)."""
    return {
        "schema_version": "resource_snapshot_v1", "agent_version": "bench", "instance_id": "__ID__",
        "timestamp_ms": 1767225600000, "hostname": "gpu-host",
        "devices": {
            "cpu": {"utilization_pct": 37.5, "load1": 3.1, "load5": 2.9, "load15": 2.5,
                    "per_core_pct": [37.5] * cores, "count_logical": cores, "count_physical": cores // 2},
            "memory": {"used_mb": 200000.0, "total_mb": 1031000.0, "free_mb": 831000.0,
                       "swap_used_mb": 0.0, "swap_total_mb": 0.0},
            "network": [{"iface": "eth0", "rx_mbps": 812.5, "tx_mbps": 455.1, "speed_mbps": 100000,
                         "rx_bytes_total": 123456789012, "tx_bytes_total": 98765432109}],
            "disk": [{"mount": "/", "used_gb": 120.5, "total_gb": 1800.0}],
            "gpu": [{
                "index": i, "uuid": f"GPU-{i:08d}", "name": "NVIDIA H100 80GB HBM3",
                "utilization_pct": 71.0, "utilization_pct_current": 74.0, "utilization_pct_avg": 71.0,
                "utilization_pct_max": 88.0, "utilization_sample_count": 5, "utilization_window_ms": 5000,
                "utilization_sample_ok": True, "utilization_source": "nvml", "utilization_sample_age_ms": 120,
                "memory_used_mb": 61000.0, "memory_total_mb": 81559.0, "memory_free_mb": 20559.0,
                "temperature_c": 61, "power_w": 512.3, "power_limit_w": 700.0, "sm_clock_mhz": 1980,
                "mem_clock_mhz": 2619, "ecc_uncorrected_volatile": 0, "throttle_reasons": [],
                "health": "ok", "health_reasons": [],
            } for i in range(gpus)],
        },
        "runtime": {},
        "gpu_status": "ok",
        "capacity_hint": {"memory_free_ratio": 0.806, "admission_state": "accepting", "admission_reasons": []},
    }


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def lua_string(text):
    return "[==[" + text + "]==]"


def run_wrk(url, method, path, body_template, seconds, per_thread, threads=2):
    script = (WRK_SCRIPT.replace("__PER_THREAD__", str(per_thread))
              .replace("__TEMPLATE__", lua_string(body_template))
              .replace("__METHOD__", json.dumps(method)).replace("__PATH__", json.dumps(path)))
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write(script)
    try:
        out = subprocess.run(
            ["wrk", "-t", str(threads), "-c", str(CONCURRENCY), "-d", f"{seconds}s", "--latency",
             "-s", handle.name, url],
            check=True, capture_output=True, text=True,
        ).stdout
    finally:
        os.unlink(handle.name)
    line = next(line for line in out.splitlines() if line.startswith("BENCH_JSON "))
    result = json.loads(line[len("BENCH_JSON "):])
    result["rps"] = result["requests"] / (result["duration_us"] / 1e6)
    return result


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


@contextlib.contextmanager
def recorder(env):
    """The series recorder (``manage.py run_recorder``) running for the length of the block."""
    process = subprocess.Popen([sys.executable, "manage.py", "run_recorder"], env=env, cwd=ROOT)
    time.sleep(3)  # Django's start-up is not part of what is measured
    try:
        yield process
    finally:
        process.terminate()
        process.wait(15)


def seed_pool(env, count):
    """Insert ``count`` reporting instances straight through the ORM."""
    code = f"""
import django, time
django.setup()
from proxy_app.models import Instance, InstanceResource
from proxy_app.normalise import normalise_snapshot
from bench.ingest import realistic_snapshot
now = time.time()
snapshot = realistic_snapshot()
columns = normalise_snapshot(snapshot, {{"report_seq": 1}}, now)
Instance.objects.all().delete()
Instance.objects.bulk_create([Instance(instance_id=f"pool-{{i}}", host="10.9.0.1", port=1 + i % 65000,
    registered_at=now, last_seen_at=now, inflight=i % 7, qps_1m=1.5) for i in range({count})], batch_size=1000)
InstanceResource.objects.bulk_create([InstanceResource(instance_id=f"pool-{{i}}", has_raw_resource=True,
    **columns) for i in range({count})], batch_size=500)
"""
    subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, check=True)


def time_pool_resource(url, rounds=40):
    session = requests.Session()
    session.get(url + "/debug/pool_resource", timeout=10).raise_for_status()
    timings = []
    for _ in range(rounds):
        started = time.perf_counter()
        response = session.get(url + "/debug/pool_resource", timeout=10)
        timings.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
    summary = response.json()["pool_resource"]["instances"]
    return statistics.median(timings), max(timings), summary


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=10, help="seconds per wrk run")
    parser.add_argument("--rounds", type=int, default=3, help="bare/ingest pairs to run")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--instances", type=int, default=1000, help="distinct instances the load reports for")
    parser.add_argument("--pool-size", type=int, default=10_000)
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (Debian: apt-get install wrk)")

    workdir = Path(tempfile.mkdtemp(prefix="fw-bench-"))
    env = dict(os.environ)
    env.update({
        "DJANGO_SETTINGS_MODULE": "bench.settings",
        "FLEETWATCH_ROLES": "proxy",
        "FLEETWATCH_VAR_DIR": str(workdir),
        "DATABASE_URL": args.database_url or f"sqlite:///{workdir}/bench.sqlite3",
        "PYTHONPATH": str(ROOT),
    })
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], env=env, cwd=ROOT, check=True)
    if args.database_url:
        subprocess.run([sys.executable, "manage.py", "flush", "--no-input", "-v0"], env=env, cwd=ROOT, check=True)

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "bench.wsgi:application", "--bind", f"127.0.0.1:{port}",
         "--workers", str(args.workers), "--worker-class", "sync", "--log-level", "warning"],
        env=env, cwd=ROOT,
    )
    try:
        wait_for_server(url, server)
        per_thread = max(1, args.instances // 2)
        session = requests.Session()
        for i in range(per_thread * 2):
            session.post(url + "/v1/instance/register",
                         json={"instance_id": f"bench-{i}", "host": "10.0.0.1", "port": 8000 + i % 1000}).raise_for_status()
        snapshot = realistic_snapshot()
        body = json.dumps({
            "instance_id": "__ID__", "snapshot": snapshot,
            "metadata": {"reported_instance_id": "__ID__", "report_monotonic_ms": 1000,
                         "report_wall_time_ms": 1767225600000, "agent_snapshot_timestamp_ms": 1767225600000,
                         "report_seq": 999999999},
        }).replace('999999999', "__SEQ__")
        print(f"snapshot body: {len(body)} bytes; {args.workers} gunicorn sync workers; "
              f"concurrency {CONCURRENCY}; {args.seconds} s per run; database {env['DATABASE_URL'].split(':')[0]}")

        run_wrk(url, "GET", "/bench/bare", "", 2, per_thread)  # warm-up
        # Bare, ingest and ingest with the series recorder running alternate,
        # so a noisy neighbour hits all alike; verdicts use the median ratios.
        ratios, recorder_ratios = [], []
        for round_no in range(1, args.rounds + 1):
            bare = run_wrk(url, "GET", "/bench/bare", "", args.seconds, per_thread)
            ingest = run_wrk(url, "POST", "/v1/instance/resource_snapshot", body, args.seconds, per_thread)
            with recorder(env):
                recorded = run_wrk(url, "POST", "/v1/instance/resource_snapshot", body, args.seconds, per_thread)
            ratios.append(ingest["rps"] / bare["rps"])
            recorder_ratios.append(recorded["rps"] / ingest["rps"])
            print(f"round {round_no}")
            for name, result in (("bare view", bare), ("snapshot ingest", ingest), ("ingest + recorder", recorded)):
                print(f"  {name:18s} {result['rps']:8.0f} req/s   p50 {result['p50_us'] / 1000:6.2f} ms   "
                      f"p99 {result['p99_us'] / 1000:6.2f} ms   non-2xx {result['non_2xx']}   "
                      f"socket errors {result['socket_errors']}")
            print(f"  ingest / bare throughput ratio: {ratios[-1]:.2f}; "
                  f"with the recorder / without: {recorder_ratios[-1]:.2f}")
            if ingest["non_2xx"] or recorded["non_2xx"]:
                raise SystemExit("ingest answered non-2xx: the benchmark is invalid")
        median = statistics.median(ratios)
        verdict = "PASS" if median >= TARGET_RATIO else "FAIL"
        print(f"median ingest / bare ratio over {args.rounds} rounds: {median:.2f} "
              f"(target ≥ {TARGET_RATIO:.2f}) {verdict}")
        slowdown = 1 - statistics.median(recorder_ratios)
        verdict = "PASS" if slowdown <= RECORDER_SLOWDOWN else "FAIL"
        print(f"median ingest slowdown with the series recorder running: {slowdown:.1%} "
              f"(target ≤ {RECORDER_SLOWDOWN:.0%}) {verdict}")

        seed_pool(env, args.pool_size)
        median_ms, worst_ms, instances = time_pool_resource(url)
        verdict = "PASS" if median_ms < POOL_TARGET_MS else "FAIL"
        print(f"/debug/pool_resource over {instances['total']} instances: median {median_ms:.1f} ms, "
              f"worst {worst_ms:.1f} ms (target < {POOL_TARGET_MS:.0f} ms) {verdict}")
    finally:
        server.terminate()
        server.wait(15)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()

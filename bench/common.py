"""What the benchmarks share: a fresh deployment, its web server, wrk, and seeding.

Nothing here is timed by a test: benchmarks print figures measured in one
run on this machine, with the commands that made them (bench/README.md).
"""

import copy
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import requests

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
GRANIAN = str(Path(sys.executable).with_name("granian"))

WRK_SCRIPT = r"""
local per_thread = __PER_THREAD__
local template = __TEMPLATE__
local headers = __HEADERS__
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
  if body == "" then body = nil end
  return wrk.format(__METHOD__, __PATH__, headers, body)
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


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def realistic_snapshot(gpus=8, cores=32):
    """About what a host's agent sends: ≈7 KB with 8 GPUs, ≈1.75 KB with one (the issue's ~1.8 KB)."""
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
                "utilization_sample_timestamp_ms": 1767225599880, "utilization_sample_quality": "ok",
                "utilization_raw_value": "74", "utilization_error": None,
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


def realistic_engine(index=0):
    """One busy vLLM engine as the agent lists it under ``engines`` (SPEC 13): ≈ 700 bytes."""
    return {
        "url": "http://127.0.0.1:8000", "kind": "vllm", "model": "meta-llama/Llama-3.1-70B-Instruct",
        "engine_index": str(index), "status": "ok", "error": None, "scraped_at_ms": 1767225599800,
        "scrape_ms": 3.4, "requests_running": 48, "requests_waiting": 12, "kv_cache_usage_ratio": 0.8125,
        "kv_cache_capacity_tokens": 1048576, "prefix_cache_hit_ratio": 0.42, "preemptions": 0,
        "prompt_tokens_per_s": 18250.5, "generation_tokens_per_s": 2410.25, "ttft_p50_s": 0.18, "ttft_p95_s": 0.92,
        "itl_p50_s": 0.021, "window_ms": 10000, "lora": {"max": 4, "running": ["sql-adapter"], "waiting": []},
        "sleeping": False,
    }


def snapshot_body_template(gpus=8, engines=0):
    """The CacheRoute report body with __ID__ and __SEQ__ for wrk to fill in; ``engines`` > 0 adds that
    many engines of a data-parallel vLLM (SPEC 13)."""
    snapshot = realistic_snapshot(gpus)
    if engines:
        snapshot["engines"] = [realistic_engine(index) for index in range(engines)]
    return json.dumps({
        "instance_id": "__ID__", "snapshot": snapshot,
        "metadata": {"reported_instance_id": "__ID__", "report_monotonic_ms": 1000,
                     "report_wall_time_ms": 1767225600000, "agent_snapshot_timestamp_ms": 1767225600000,
                     "report_seq": 999999999},
    }).replace("999999999", "__SEQ__")


class Deployment:
    """A fresh database and the environment of every process of one deployment."""

    def __init__(self, database_url=None, roles="proxy,scheduler", root=ROOT, **settings):
        self.root = root  # the source tree its processes run (another worktree, to compare side by side)
        self.workdir = Path(tempfile.mkdtemp(prefix="fw-bench-"))
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEETWATCH_", "DJANGO_"))}
        self.env.update({
            "DJANGO_SETTINGS_MODULE": "controlplane.settings",
            "FLEETWATCH_ROLES": roles,
            "FLEETWATCH_VAR_DIR": str(self.workdir),
            "DATABASE_URL": database_url or f"sqlite:///{self.workdir}/bench.sqlite3",
            "PYTHONPATH": str(root),
            "PROMETHEUS_MULTIPROC_DIR": str(self.workdir / "prometheus"),
            **{key: str(value) for key, value in settings.items()},
        })
        (self.workdir / "prometheus").mkdir()
        self.manage("migrate", "-v0")
        if database_url:
            self.manage("flush", "--no-input", "-v0")

    def on(self, root):
        """This deployment (its database, its settings) with its processes run from another source tree."""
        other = copy.copy(self)
        other.root, other.env = Path(root), {**self.env, "PYTHONPATH": str(root)}
        return other

    @property
    def vendor(self):
        return self.env["DATABASE_URL"].split(":")[0]

    def manage(self, *args, env=None):
        result = subprocess.run([PYTHON, "manage.py", *args], env={**self.env, **(env or {})}, cwd=self.root,
                                capture_output=True, text=True)
        if result.returncode:
            raise SystemExit(f"manage.py {' '.join(args)} failed:\n{result.stderr[-3000:]}")
        return result.stdout

    def python(self, code, *args):
        result = subprocess.run([PYTHON, "-c", code, *map(str, args)], env=self.env, cwd=self.root,
                                capture_output=True, text=True)
        if result.returncode:
            raise SystemExit(f"bench step failed:\n{result.stderr[-3000:]}")
        return result.stdout

    def analyze(self):
        """Refresh the planner's statistics after a bulk seed, as autovacuum would within a minute
        (PostgreSQL planned the 10,000-row pool from an empty table's estimates until then)."""
        if self.vendor.startswith("postgres"):
            self.python("import django; django.setup()\nfrom django.db import connection\n"
                        "connection.cursor().execute('ANALYZE')")

    def token(self, scope, name):
        return self.manage("create_token", "--scope", scope, "--name", name).splitlines()[-1]

    def cleanup(self):
        import shutil

        shutil.rmtree(self.workdir, ignore_errors=True)


class WebServer:
    """The deployment's web server: granian as ``up`` runs it, or gunicorn to compare."""

    def __init__(self, deployment, kind="granian", workers=None, threads=None, env=None,
                 app="controlplane.wsgi:application"):
        """``threads``: granian's blocking threads a worker; None, as ``up`` runs it (``FLEETWATCH_WEB_THREADS``)."""
        from controlplane import settings  # plain constants from the environment: no Django set-up needed

        server_env = {**deployment.env, **(env or {})}
        threads = threads or int(server_env.get("FLEETWATCH_WEB_THREADS", settings.FLEETWATCH_WEB_THREADS))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.kind = kind
        self.workers = workers or os.cpu_count() or 1
        if kind == "granian":
            argv = [GRANIAN, "--interface", "wsgi", app, "--host", "127.0.0.1",
                    "--port", str(self.port), "--workers", str(self.workers), "--blocking-threads", str(threads),
                    "--no-ws", "--log-level", "warning"]
        else:
            argv = [PYTHON, "-m", "gunicorn", app, "--bind", f"127.0.0.1:{self.port}",
                    "--workers", str(self.workers), "--worker-class", "sync", "--log-level", "warning"]
        self.label = f"{kind} ×{self.workers}" + (f" ({threads} threads)" if kind == "granian" else " (sync)")
        self.process = subprocess.Popen(argv, env=server_env, cwd=deployment.root)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"{kind} exited early")
            try:
                if requests.get(self.url + "/healthz", timeout=1).ok:
                    return
            except requests.RequestException:
                time.sleep(0.2)
        raise SystemExit(f"{kind} did not start")

    def cpu_seconds(self):
        """User + system CPU of the server and all its workers so far."""
        total = 0.0
        root = psutil.Process(self.process.pid)
        for process in (root, *root.children(recursive=True)):
            try:
                times = process.cpu_times()
                total += times.user + times.system
            except psutil.NoSuchProcess:
                pass
        return total

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()


class Recorder:
    """``manage.py run_recorder`` beside the web server, as ``up`` runs it."""

    def __init__(self, deployment):
        self.process = subprocess.Popen([PYTHON, "manage.py", "run_recorder"], env=deployment.env, cwd=ROOT)
        time.sleep(3)  # Django's start-up is not part of what is measured

    def stop(self):
        self.process.terminate()
        self.process.wait(20)


def wrk(url, method, path, seconds, body="", per_thread=500, token=None, threads=2, connections=16, delay_ms=None):
    """One wrk run; requests, req/s, latency percentiles, errors. With ``delay_ms`` each connection waits that
    long between an answer and its next request (as an agent does between reports): a paced load."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    lua_headers = "{" + ", ".join(f'["{k}"] = "{v}"' for k, v in headers.items()) + "}"
    script = (WRK_SCRIPT.replace("__PER_THREAD__", str(per_thread)).replace("__TEMPLATE__", "[==[" + body + "]==]")
              .replace("__HEADERS__", lua_headers).replace("__METHOD__", json.dumps(method))
              .replace("__PATH__", json.dumps(path)))
    if delay_ms is not None:
        script += f"\ndelay = function() return {int(delay_ms)} end\n"
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write(script)
    try:
        out = subprocess.run(["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{seconds}s", "--latency",
                              "-s", handle.name, url], check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(handle.name)
    line = next(line for line in out.splitlines() if line.startswith("BENCH_JSON "))
    result = json.loads(line[len("BENCH_JSON "):])
    result["rps"] = result["requests"] / (result["duration_us"] / 1e6)
    return result


def measured(server, method, path, seconds, **kwargs):
    """A wrk run with the server's CPU time per request."""
    before = server.cpu_seconds()
    result = wrk(server.url, method, path, seconds, **kwargs)
    result["cpu_ms"] = (server.cpu_seconds() - before) * 1000 / max(result["requests"], 1)
    return result


def timed_gets(url, path, count, token=None, cookies=None, concurrency=1, timeout=120):
    """Median, 90th percentile and worst milliseconds of ``count`` GETs (``concurrency`` at a time)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    timings, lock = [], threading.Lock()

    def one(session):
        started = time.perf_counter()
        response = session.get(url + path, headers=headers, cookies=cookies, timeout=timeout)
        elapsed = (time.perf_counter() - started) * 1000
        response.raise_for_status()
        with lock:
            timings.append(elapsed)

    def worker(share):
        session = requests.Session()
        one(session)  # warm the connection
        with lock:
            timings.pop()
        for _ in range(share):
            one(session)

    threads = [threading.Thread(target=worker, args=(count // concurrency,)) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    timings.sort()
    return {"p50": statistics.median(timings), "p90": timings[int(len(timings) * 0.9) - 1], "max": timings[-1]}


def register_instances(url, count, token, prefix="bench-"):
    session = requests.Session()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    for i in range(count):
        session.post(url + "/v1/instance/register", headers=headers, timeout=30,
                     json={"instance_id": f"{prefix}{i}", "host": "10.0.0.1", "port": 8000 + i % 1000}).raise_for_status()


SEED_POOL = """
import sys, time
import django
django.setup()
from controlplane.endpoints.admission import Admission
from proxy_app.models import Instance, InstanceResource, InstanceSnapshot
from proxy_app.ingest.normalise import normalise_snapshot
from bench.common import realistic_snapshot
count, gpus = int(sys.argv[1]), int(sys.argv[2])
now = time.time()
states = list(Admission.values)
Instance.objects.filter(instance_id__startswith="pool-").delete()
instances, resources, snapshots = [], [], []
for i in range(count):
    snapshot = realistic_snapshot(gpus)
    snapshot["devices"]["cpu"]["utilization_pct"] = float(i % 100)
    snapshot["capacity_hint"]["admission_state"] = states[i % 7 % 3]
    columns = normalise_snapshot(snapshot, {"report_seq": 1}, now)
    # 5 % of the pool stale, the rest seen within the last seconds.
    seen = now - (600 if i % 20 == 0 else i % 10)
    instances.append(Instance(instance_id=f"pool-{i}", host="10.9.0.1", port=1 + i % 65000, registered_at=now,
                              last_seen_at=seen, inflight=i % 7, qps_1m=1.5))
    snapshots.append(InstanceSnapshot(instance_id=f"pool-{i}", raw_resource=columns.pop("raw_resource")))
    resources.append(InstanceResource(instance_id=f"pool-{i}", has_raw_resource=True, **columns))
Instance.objects.bulk_create(instances, batch_size=1000)
InstanceResource.objects.bulk_create(resources, batch_size=500)
InstanceSnapshot.objects.bulk_create(snapshots, batch_size=500)
"""


def seed_pool(deployment, count, gpus=8):
    """``count`` reporting instances (``pool-0`` …) with realistic snapshots, straight into the database."""
    deployment.python(SEED_POOL, count, gpus)
    deployment.analyze()


def run_inside(script, database_url, name, argv, prepare=None):
    """``script`` run again in a process of its own on a fresh deployment (rate limits off), given an instance
    token as ``--token`` before ``argv``; ``prepare(deployment)`` first, if given (a seed)."""
    deployment = Deployment(database_url, FLEETWATCH_RATE_LIMIT=0)
    try:
        token = deployment.token("instance", name)
        if prepare is not None:
            prepare(deployment)
        subprocess.run([PYTHON, script, "--token", token, *map(str, argv)], env=deployment.env, cwd=ROOT,
                       check=True)
    finally:
        deployment.cleanup()

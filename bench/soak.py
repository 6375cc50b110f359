"""Soak: one Proxy as ``up`` runs it (SQLite by default), a simulated fleet at 1 Hz for minutes.

    .venv/bin/python bench/soak.py [--instances 1000] [--duration 600] [--every 30]
        [--database-url postgres://postgres@127.0.0.1:5432/NAME] [--processes 1]

Starts ``manage.py up --no-agent`` on a fresh var directory (the default
SQLite database, or a fresh PostgreSQL database ``NAME_soak`` made on the
server of ``--database-url``; granian, the task cluster, the recorder, the
link), drives ``--instances`` simulated hosts at 1 Hz with the simulator
(``--processes`` event loops) for ``--duration`` seconds, and samples every
``--every`` seconds the resident memory of every process ``up`` started and
the size of the database. Prints: the simulator's summary (zero errors is the
bar), whether anything acknowledged was lost (the instances stay registered:
the sum of their stored ``report_seq`` against the snapshots acknowledged),
the CPU each part used over the run (web workers, the rest of ``up``, the
simulator, PostgreSQL's processes) and per acknowledged request, PostgreSQL's
committed transactions per report, each process's RSS at the first sample
after warm-up and at the end, and the database growth beside what the
history windows predict for the rows written (per-row sizes from
docs/history.md; SQLite's).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import PYTHON, free_port  # noqa: E402

# Bytes per row on SQLite, indexes included (docs/history.md). A minute rollup: 240 B, measured
# by bench/run.py's history seed. A pool summary row: ~2.1 KB (it keeps the whole summary).
# A full-resolution sample as the recorder writes it (interleaved across instances, so the
# (instance_id, t) index splits pages): 142 B with its indexes, measured with SQLite's dbstat
# after this soak; 124 B when bench/run.py seeds a day in order.
SAMPLE_ROW_BYTES = 142
MINUTE_ROW_BYTES = 240
POOL_ROW_BYTES = 2100
COUNT_ROWS = """
import django; django.setup()
from proxy_app.models import InstanceMinute, InstanceSample, PoolResource
print(InstanceSample.objects.count(), InstanceMinute.objects.count(), PoolResource.objects.count())
"""
# The sum of the stored report_seq (every instance is a simulated one): each counts its acknowledged reports.
STORED_SEQ = """
import django; django.setup()
from django.db.models import Sum
from proxy_app.models import InstanceResource
print(InstanceResource.objects.aggregate(s=Sum("report_seq"))["s"] or 0)
"""
# PostgreSQL: the committed transactions of this database, and its size.
PG_STATS = """
import django; django.setup()
from django.db import connection
with connection.cursor() as cursor:
    cursor.execute("SELECT xact_commit, pg_database_size(current_database()) FROM pg_stat_database "
                   "WHERE datname = current_database()")
    print(*cursor.fetchone())
"""


def role_of(process):
    try:
        line = " ".join(process.cmdline())
    except psutil.Error:
        return None
    for word in ("granian", "qcluster", "run_recorder", "run_link"):
        if word in line:
            return word
    return "up" if " up" in line else "other"


def tree(root):
    processes = [root]
    try:
        processes += root.children(recursive=True)
    except psutil.Error:
        pass
    return processes


def resident(process):
    """(anonymous, file-backed) resident bytes: the heap, and pages of mapped files (the
    SQLite database is memory-mapped, so the pages a process reads count here)."""
    fields = {}
    with open(f"/proc/{process.pid}/status") as status:
        for text in status:
            name, _, value = text.partition(":")
            if name in ("RssAnon", "RssFile", "RssShmem"):
                fields[name] = int(value.split()[0]) * 1024
    return fields.get("RssAnon", 0), fields.get("RssFile", 0) + fields.get("RssShmem", 0)


def django_python(env, code):
    """The numbers ``code`` prints, run in a Django process of the soak's deployment (None when it fails)."""
    result = subprocess.run([PYTHON, "-c", code], env={**env, "DJANGO_SETTINGS_MODULE": "controlplane.settings"},
                            cwd=ROOT, capture_output=True, text=True)
    if result.returncode:
        print("query failed:", result.stderr[-500:], flush=True)
        return None
    return list(map(int, result.stdout.split()))


def row_counts(env):
    return django_python(env, COUNT_ROWS)


def database_bytes(var, env):
    """The database alone: SQLite's file (its write-ahead log is reused, not a store of rows: printed apart),
    or PostgreSQL's ``pg_database_size``."""
    if "DATABASE_URL" in env:
        stats = django_python(env, PG_STATS)
        return stats[1] if stats else 0
    return (var / "fleetwatch.sqlite3").stat().st_size


def wal_bytes(var):
    wal = var / "fleetwatch.sqlite3-wal"
    return wal.stat().st_size if wal.exists() else 0


def postgres_database(base):
    """``base``'s server with a fresh database ``<name>_soak`` made on it."""
    head, name = base.rsplit("/", 1)
    database = f"{name}_soak"
    subprocess.run(["dropdb", "--if-exists", "-h", "127.0.0.1", "-U", "postgres", database], check=True)
    subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", database], check=True)
    return f"{head}/{database}"


def cpu_seconds(processes):
    """CPU seconds (user + system) of each live process, by pid."""
    seconds = {}
    for process in processes:
        try:
            times = process.cpu_times()
            seconds[process.pid] = (process, times.user + times.system)
        except psutil.Error:
            pass
    return seconds


def postgres_processes():
    return [p for p in psutil.process_iter(["name"]) if p.info["name"] in ("postgres", "postmaster")]


def cpu_used(before, after, role):
    """CPU seconds by ``role(process)`` between two ``cpu_seconds``: the processes alive at the end (one started
    meanwhile, such as a PostgreSQL backend for a web worker's first connection, counts from zero)."""
    used = {}
    for pid, (process, seconds) in after.items():
        used[role(process)] = used.get(role(process), 0.0) + seconds - (before[pid][1] if pid in before else 0.0)
    return used


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=int, default=1000)
    parser.add_argument("--duration", type=int, default=600)
    parser.add_argument("--every", type=int, default=30)
    parser.add_argument("--database-url", default=None, help="a PostgreSQL server and base name (default SQLite)")
    parser.add_argument("--processes", type=int, default=1, help="the simulator's event loops (processes)")
    args = parser.parse_args()

    var = Path(tempfile.mkdtemp(prefix="fw-soak-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEETWATCH_", "DJANGO_", "DATABASE_URL"))}
    env.update({"FLEETWATCH_VAR_DIR": str(var), "PYTHONUNBUFFERED": "1"})
    if args.database_url:
        env["DATABASE_URL"] = postgres_database(args.database_url)
    vendor = "PostgreSQL" if args.database_url else "SQLite"
    subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], env=env, cwd=ROOT, check=True)
    token = subprocess.run([PYTHON, "manage.py", "create_token", "--scope", "instance", "--name", "soak"], env=env,
                           cwd=ROOT, check=True, capture_output=True, text=True).stdout.splitlines()[-1]
    port = free_port()
    with open(var / "up.log", "wb") as log:
        up = subprocess.Popen([PYTHON, "manage.py", "up", "--no-agent", "--port", str(port)], env=env, cwd=ROOT,
                              stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if requests.get(url + "/healthz", timeout=1).ok:
                break
        except requests.RequestException:
            time.sleep(0.5)
    else:
        raise SystemExit("up did not start; see " + str(var / "up.log"))

    samples, stop = [], threading.Event()

    def sample():
        while not stop.wait(args.every):
            rss = {}
            for process in tree(psutil.Process(up.pid)):
                try:
                    rss[f"{role_of(process)}[{process.pid}]"] = resident(process)
                except (OSError, psutil.Error):
                    pass
            samples.append({"t": time.monotonic(), "rss": rss, "db": database_bytes(var, env), "wal": wal_bytes(var),
                            "rows": row_counts(env)})

    sampler = threading.Thread(target=sample, daemon=True)
    summary_path = var / "soak.json"
    try:
        print(f"soak: {args.instances} instances at 1 Hz for {args.duration} s against up ({vendor}) on {url}",
              flush=True)
        sampler.start()
        commits_before = django_python(env, PG_STATS) if args.database_url else None
        server_before = cpu_seconds(tree(psutil.Process(up.pid)))
        database_before = cpu_seconds(postgres_processes())
        started = time.monotonic()
        with open(var / "simulator.log", "wb") as out:
            simulator = subprocess.Popen(
                [PYTHON, "manage.py", "simulate_fleet", "--proxy-url", url, "--instances", str(args.instances),
                 "--interval-ms", "1000", "--duration", str(args.duration), "--calm", "--no-progress",
                 "--processes", str(args.processes), "--no-unregister", "--json", str(summary_path),
                 "--token", token],
                env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
            # wait4: the simulator's CPU, its own event-loop processes included (it waits for them).
            _, status, usage = os.wait4(simulator.pid, 0)
            simulator.returncode = os.waitstatus_to_exitcode(status)
        elapsed = time.monotonic() - started
        server_cpu = cpu_used(server_before, cpu_seconds(tree(psutil.Process(up.pid))), role_of)
        database_cpu = cpu_used(database_before, cpu_seconds(postgres_processes()), lambda _: "postgres")
        commits_after = django_python(env, PG_STATS) if args.database_url else None
        stop.set()
        sampler.join()
        print((var / "simulator.log").read_text()[-4000:])
        stored = django_python(env, STORED_SEQ)
    finally:
        up.terminate()
        up.wait(60)
    summary = json.loads(summary_path.read_text())
    acknowledged = summary["requests"]["snapshot"]["acknowledged"]
    latency = summary["requests"]["snapshot"]["latency_ms"]
    print(f"errors {summary['errors']} {summary['errors_by_kind']}; achieved {summary['rate']['achieved_per_s']:.0f}/s "
          f"of {summary['rate']['target_per_s']:.0f}/s (acknowledged of due {summary['rate']['acknowledged_of_due']:.2f})")
    print(f"snapshot latency p50 {latency['p50']:.1f} ms, p99 {latency['p99']:.1f} ms; schedule lag "
          f"{summary['schedule_lag_ms']}")
    print(f"snapshots acknowledged {acknowledged:,}; sum of stored report_seq {stored[0] if stored else -1:,} "
          f"({'none lost' if stored and stored[0] == acknowledged else 'MISMATCH'})")
    requests_done = summary["acknowledged"]
    cpu = {**server_cpu, **database_cpu, "simulator": usage.ru_utime + usage.ru_stime}
    print(f"CPU over {elapsed:.0f} s, cores (ms per acknowledged request, {requests_done:,} requests): " + ", ".join(
        f"{role} {seconds / elapsed:.2f} ({seconds * 1000 / max(requests_done, 1):.3f})"
        for role, seconds in sorted(cpu.items(), key=lambda item: -item[1])))
    if commits_before and commits_after:
        commits = commits_after[0] - commits_before[0]
        print(f"PostgreSQL: {commits:,} transactions committed, {acknowledged / max(commits, 1):.2f} snapshots "
              f"per commit ({requests_done / max(commits, 1):.2f} requests)")
    print(f"machine load average {' '.join(f'{x:.1f}' for x in psutil.getloadavg())}")
    if not samples:
        return
    first, last = samples[1] if len(samples) > 2 else samples[0], samples[-1]
    at = lambda sample: sample["t"] - samples[0]["t"] + args.every  # noqa: E731
    mib = lambda value: f"{value / 2**20:7.1f}"  # noqa: E731
    print(f"resident memory, MiB, at {at(first):.0f} s → at {at(last):.0f} s: heap (RssAnon), then mapped "
          f"files (RssFile: the memory-mapped database and libraries)")
    for name in sorted(first["rss"]):
        if name in last["rss"]:
            (anon0, file0), (anon1, file1) = first["rss"][name], last["rss"][name]
            print(f"  {name:24} heap {mib(anon0)} → {mib(anon1)}   files {mib(file0)} → {mib(file1)}")
    print("heap of every process, MiB, each sample:",
          " ".join(f"{sum(anon for anon, _ in s['rss'].values()) / 2**20:.0f}" for s in samples))
    counted = [sample for sample in samples[1:] if sample["rows"]]
    if len(counted) >= 2:
        start, end = counted[0], counted[-1]
        grown = end["db"] - start["db"]
        written = [after - before for before, after in zip(start["rows"], end["rows"])]
        predicted = written[0] * SAMPLE_ROW_BYTES + written[1] * MINUTE_ROW_BYTES + written[2] * POOL_ROW_BYTES
        print(f"database from {at(start):.0f} s to {at(end):.0f} s: {start['db'] / 2**20:.1f} MiB → "
              f"{end['db'] / 2**20:.1f} MiB (grew {grown / 2**20:.1f} MiB); rows added: {written[0]:,} samples, "
              f"{written[1]:,} minute rollups, {written[2]:,} pool summaries, which SQLite's per-row sizes put at "
              f"{predicted / 2**20:.1f} MiB")
    print("database, each sample (MiB):", " ".join(f"{s['db'] / 2**20:.1f}" for s in samples))
    if not args.database_url:
        print("write-ahead log, each sample (MiB):", " ".join(f"{s['wal'] / 2**20:.1f}" for s in samples))


if __name__ == "__main__":
    main()

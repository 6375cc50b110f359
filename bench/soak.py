"""Soak: one Proxy as ``up`` runs it by default (SQLite), a simulated fleet at 1 Hz for minutes.

    .venv/bin/python bench/soak.py [--instances 1000] [--duration 600] [--every 30]

Starts ``manage.py up --no-agent`` on a fresh var directory (the default
SQLite database, granian, the task cluster, the recorder, the link), drives
``--instances`` simulated hosts at 1 Hz with the simulator for
``--duration`` seconds, and samples every ``--every`` seconds the resident
memory of every process ``up`` started and the size of the database files.
Prints: the simulator's summary (zero errors is the bar), each process's RSS
at the first sample after warm-up and at the end, and the database growth
beside what the history windows predict for the rows written (per-row sizes
from docs/history.md).
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


def row_counts(env):
    result = subprocess.run([PYTHON, "-c", COUNT_ROWS], env={**env, "DJANGO_SETTINGS_MODULE": "controlplane.settings"},
                            cwd=ROOT, capture_output=True, text=True)
    if result.returncode:
        print("row count failed:", result.stderr[-500:], flush=True)
        return None
    return list(map(int, result.stdout.split()))


def database_bytes(var):
    """The database file alone: its write-ahead log is reused, not a store of rows (printed apart)."""
    return (var / "fleetwatch.sqlite3").stat().st_size


def wal_bytes(var):
    wal = var / "fleetwatch.sqlite3-wal"
    return wal.stat().st_size if wal.exists() else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=int, default=1000)
    parser.add_argument("--duration", type=int, default=600)
    parser.add_argument("--every", type=int, default=30)
    args = parser.parse_args()

    var = Path(tempfile.mkdtemp(prefix="fw-soak-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEETWATCH_", "DJANGO_", "DATABASE_URL"))}
    env.update({"FLEETWATCH_VAR_DIR": str(var), "PYTHONUNBUFFERED": "1"})
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
            samples.append({"t": time.monotonic(), "rss": rss, "db": database_bytes(var), "wal": wal_bytes(var),
                            "rows": row_counts(env)})

    sampler = threading.Thread(target=sample, daemon=True)
    summary_path = var / "soak.json"
    try:
        print(f"soak: {args.instances} instances at 1 Hz for {args.duration} s against up (SQLite) on {url}",
              flush=True)
        sampler.start()
        run = subprocess.run(
            [PYTHON, "manage.py", "simulate_fleet", "--proxy-url", url, "--instances", str(args.instances),
             "--interval-ms", "1000", "--duration", str(args.duration), "--calm", "--no-progress",
             "--json", str(summary_path), "--token", token],
            env=env, cwd=ROOT, capture_output=True, text=True,
        )
        stop.set()
        sampler.join()
        print(run.stdout[-4000:])
    finally:
        up.terminate()
        up.wait(60)
    summary = json.loads(summary_path.read_text())
    print(f"errors {summary['errors']} {summary['errors_by_kind']}; achieved {summary['rate']['achieved_per_s']:.0f}/s "
          f"of {summary['rate']['target_per_s']:.0f}/s (acknowledged of due {summary['rate']['acknowledged_of_due']:.2f})")
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
              f"{written[1]:,} minute rollups, {written[2]:,} pool summaries, which the per-row sizes put at "
              f"{predicted / 2**20:.1f} MiB")
    print("database file, each sample (MiB):", " ".join(f"{s['db'] / 2**20:.1f}" for s in samples))
    print("write-ahead log, each sample (MiB):", " ".join(f"{s['wal'] / 2**20:.1f}" for s in samples))


if __name__ == "__main__":
    main()

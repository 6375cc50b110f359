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

# Bytes per row on SQLite, measured by bench/run.py's history seed (docs/history.md).
SAMPLE_ROW_BYTES = 124
MINUTE_ROW_BYTES = 240
COUNT_ROWS = """
import django; django.setup()
from proxy_app.models import InstanceMinute, InstanceSample
print(InstanceSample.objects.count(), InstanceMinute.objects.count())
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


def database_bytes(var):
    return sum(path.stat().st_size for path in var.glob("fleetwatch.sqlite3*") if path.is_file())


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
                    rss[f"{role_of(process)}[{process.pid}]"] = process.memory_info().rss
                except psutil.Error:
                    pass
            rows = subprocess.run([PYTHON, "-c", COUNT_ROWS], env=env, cwd=ROOT, capture_output=True,
                                  text=True).stdout.split()
            samples.append({"t": time.monotonic(), "rss": rss, "db": database_bytes(var), "rows": list(map(int, rows))})

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
    print(f"RSS, MiB: at {first['t'] - samples[0]['t'] + args.every:.0f} s → at the end "
          f"({last['t'] - samples[0]['t'] + args.every:.0f} s)")
    for name in sorted(first["rss"]):
        if name in last["rss"]:
            print(f"  {name:28} {first['rss'][name] / 2**20:7.1f} → {last['rss'][name] / 2**20:7.1f}")
    grown = last["db"] - first["db"]
    predicted = ((last["rows"][0] - first["rows"][0]) * SAMPLE_ROW_BYTES
                 + (last["rows"][1] - first["rows"][1]) * MINUTE_ROW_BYTES)
    print(f"database: {first['db'] / 2**20:.1f} MiB → {last['db'] / 2**20:.1f} MiB (grew {grown / 2**20:.1f} MiB); "
          f"rows written in between: {last['rows'][0] - first['rows'][0]:,} samples, "
          f"{last['rows'][1] - first['rows'][1]:,} minute rollups, which the per-row sizes put at "
          f"{predicted / 2**20:.1f} MiB")
    print("RSS series (MiB, all processes):",
          " ".join(f"{sum(s['rss'].values()) / 2**20:.0f}" for s in samples))
    print("database series (MiB):", " ".join(f"{s['db'] / 2**20:.1f}" for s in samples))


if __name__ == "__main__":
    main()

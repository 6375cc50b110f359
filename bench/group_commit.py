#!/usr/bin/env python
"""Issue 33: ingest before and after group commit, side by side in one run.

    .venv/bin/python bench/group_commit.py --before /work/wt-i33-base [--database-url URL]
        [--threads 4] [--seconds 8] [--rounds 2] [--gpus 1] [--paced-seconds 8]

Two deployments, each on its own fresh database (SQLite files, or two
PostgreSQL databases ``<name>_before`` and ``<name>_after`` made on the
server of ``--database-url``): **before** runs the tree at ``--before`` (main
before issue 33: granian's workers of one blocking thread, a commit per
report), **after** runs this tree (``--threads`` blocking threads a worker,
the group commit; a list such as ``2,4,8`` runs one after side for each). Each has 1,000 registered instances and a web server as
``up`` starts it (one worker per CPU). Rounds alternate which goes first; each
round measures, on each server, with wrk at concurrency 16: ``/healthz``,
snapshot ingest (``--gpus 1``: ~1.8 KB bodies, as issue 23's run) and
heartbeats, with the server's CPU per request (all its processes). Then each
server is paced at 80 % of its own measured ingest capacity (64 connections,
each waiting between an answer and its next report, as agents do) and the
p50 / p99 of an acknowledged report are read.
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, Deployment, WebServer, measured, register_instances, snapshot_body_template  # noqa: E402
from bench.run import ORIGINAL_PER_HEALTHZ  # noqa: E402

INGEST_PATH = "/v1/instance/resource_snapshot"
HEARTBEAT_PATH = "/v1/instance/heartbeat"
HEARTBEAT_BODY = '{"instance_id": "__ID__", "inflight": 3, "qps_1m": 1.5}'
PACED_CONNECTIONS = 64


def postgres_url(base, suffix):
    """``base``'s server with a fresh database ``<name>_<suffix>`` made on it."""
    head, name = base.rsplit("/", 1)
    database = f"{name}_{suffix}"
    subprocess.run(["dropdb", "--if-exists", "-h", "127.0.0.1", "-U", "postgres", database], check=True)
    subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", database], check=True)
    return f"{head}/{database}"


class Side:
    """One tree's deployment, token, server and figures."""

    def __init__(self, name, root, database_url, threads):
        self.name = name
        self.deployment = Deployment(database_url, roles="proxy", root=root, FLEETWATCH_RATE_LIMIT=0)
        self.token = self.deployment.token("instance", "bench-agents")
        self.server = WebServer(self.deployment, threads=threads)
        register_instances(self.server.url, 1000, self.token)
        self.runs = {"healthz": [], "ingest": [], "heartbeat": []}

    def round(self, args, body):
        self.runs["healthz"].append(measured(self.server, "GET", "/healthz", args.seconds))
        commits = self.commits()
        self.runs["ingest"].append(measured(self.server, "POST", INGEST_PATH, args.seconds, body=body,
                                            token=self.token))
        if commits is not None:
            time.sleep(1.5)  # PostgreSQL publishes a backend's counts within a second
            self.runs["ingest"][-1]["per_commit"] = self.runs["ingest"][-1]["requests"] / (self.commits() - commits)
        self.runs["heartbeat"].append(measured(self.server, "POST", HEARTBEAT_PATH, args.seconds,
                                               body=HEARTBEAT_BODY, token=self.token))
        for what, runs in self.runs.items():
            if runs[-1]["non_2xx"] or runs[-1]["socket_errors"]:
                raise SystemExit(f"{self.name} {what}: non-2xx or socket errors: {runs[-1]}")
        per_commit = self.runs["ingest"][-1].get("per_commit")
        print(f"  {self.name}: " + ("" if per_commit is None else f"{per_commit:.1f} reports per commit, ") + ", ".join(
            f"{what} {runs[-1]['rps']:,.0f}/s ({runs[-1]['cpu_ms']:.3f} ms CPU, p99 {runs[-1]['p99_us'] / 1000:.1f} ms)"
            for what, runs in self.runs.items()), flush=True)

    def commits(self):
        """PostgreSQL's count of committed transactions in this side's database (None on SQLite)."""
        if not self.deployment.vendor.startswith("postgres"):
            return None
        name = self.deployment.env["DATABASE_URL"].rsplit("/", 1)[1]
        out = subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-tAc",
                              f"SELECT xact_commit FROM pg_stat_database WHERE datname = '{name}'"],
                             check=True, capture_output=True, text=True).stdout
        return int(out.strip())

    def median(self, what, key="rps"):
        return statistics.median(run[key] for run in self.runs[what])

    def paced(self, args, body):
        """p50 / p99 at 80 % of this side's own ingest capacity."""
        target = 0.8 * self.median("ingest")
        delay_ms = max(1, round(PACED_CONNECTIONS * 1000 / target))
        result = measured(self.server, "POST", INGEST_PATH, args.paced_seconds, body=body, token=self.token,
                          connections=PACED_CONNECTIONS, delay_ms=delay_ms)
        return target, result

    def stop(self):
        self.server.stop()
        self.deployment.cleanup()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, type=Path, help="the tree to compare with (a worktree of main)")
    parser.add_argument("--database-url")
    parser.add_argument("--threads", default="4", help="blocking threads per worker of the after side(s): 4 or 2,4,8")
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--paced-seconds", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--gpus", type=int, default=1)
    args = parser.parse_args()
    threads = [int(n) for n in args.threads.split(",")]
    names = ["before", *(f"after-t{n}" for n in threads)]
    urls = {name: None for name in names}
    if args.database_url:
        urls = {name: postgres_url(args.database_url, name.replace("-", "_")) for name in names}
    body = snapshot_body_template(args.gpus)
    sides = []
    try:
        sides.append(Side("before", args.before.resolve(), urls["before"], 1))
        for n in threads:
            sides.append(Side(f"after-t{n}", ROOT, urls[f"after-t{n}"], n))
        for round_no in range(1, args.rounds + 1):
            print(f"round {round_no}", flush=True)
            for side in sides if round_no % 2 else reversed(sides):
                side.round(args, body)
        for after in sides[1:]:
            compare(sides[0], after)
        for side in sides:
            target, result = side.paced(args, body)
            print(f"{side.name}: paced at 80 % of its capacity ({target:,.0f}/s asked): {result['rps']:,.0f}/s, "
                  f"p50 {result['p50_us'] / 1000:.1f} ms, p99 {result['p99_us'] / 1000:.1f} ms, "
                  f"{result['cpu_ms']:.3f} ms CPU, non-2xx {result['non_2xx']}", flush=True)
    finally:
        for side in sides:
            side.stop()


def compare(before, after):
    """The table of one after side against the before side, round by round."""
    print(f"\n{'what':<44} {'before':>12} {after.name:>12} {'ratio':>13}")
    for what in ("healthz", "ingest", "heartbeat"):
        ratios = [a["rps"] / b["rps"] for a, b in zip(after.runs[what], before.runs[what])]
        print(f"{what + ' req/s (median of rounds)':<44} {before.median(what):>12,.0f} {after.median(what):>12,.0f} "
              f"{statistics.median(ratios):>12.2f}× (rounds {min(ratios):.2f}-{max(ratios):.2f})")
        print(f"{'  server CPU per request, ms':<44} {before.median(what, 'cpu_ms'):>12.3f} "
              f"{after.median(what, 'cpu_ms'):>12.3f}")
        print(f"{'  p99 at c16, ms':<44} {before.median(what, 'p99_us') / 1000:>12.1f} "
              f"{after.median(what, 'p99_us') / 1000:>12.1f}")
    original = after.median("ingest") / (ORIGINAL_PER_HEALTHZ * after.median("healthz"))
    print(f"{'ingest / the original (estimated, as run.py)':<44} {'':>12} {original:>12.2f}")


if __name__ == "__main__":
    main()

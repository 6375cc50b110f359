"""Faults: kill -9 of the whole server, a database outage, fuzzed bodies (issue 20's figures).

    .venv/bin/python bench/faults.py [--database-url postgres://postgres@127.0.0.1:5432/fleetwatch]
        [--kill-runs 4] [--stream-s 8] [--outage-s 12] [--fuzz 21000]

Each phase runs against a fresh ``manage.py up`` (two granian workers, auth
on, loopback as a trusted network so clients send no token, rate limits
off), started the way the system tests start it (``tests/live.py``):

1. kill -9: four clients stream snapshot reports over kept-alive sessions;
   every process of ``up`` is killed at once, ``up`` is started again, and
   every acknowledged report must be stored (its ``report_seq`` or a later one).
2. outage: the same stream while the database is out of reach for
   ``--outage-s`` seconds (PostgreSQL: through a TCP relay that is killed,
   ``tests/outages.py``; SQLite: the database file moved aside), with a
   reader beside it; answers are counted by status, then the acknowledged
   reports are checked as above. The server is not restarted.
3. fuzz: ``--fuzz`` random bodies to the four instance writes and the
   Proxy register, over kept-alive sessions: random JSON of every type and
   size (huge numbers, NUL escapes, deep nesting, bodies over the limit),
   counted by status; a request that got no answer at all counts as lost.

Prints one line per phase; the figures in bench/README.md come from it.
"""

import argparse
import collections
import json
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.live import LiveServer, wait_for  # noqa: E402
from tests.outages import outage_on_suite_backend  # noqa: E402

INSTANCES = 40
ENV = {"FLEETWATCH_INSTANCE_TTL_S": "3600", "FLEETWATCH_RATE_LIMIT": "0"}
SNAPSHOT = {"schema_version": "resource_snapshot_v1", "devices": {"cpu": {"utilization_pct": 1.0}}}


class Stream(threading.Thread):
    """Posts reports round-robin over the instances with a rising report_seq; keeps every acknowledgement."""

    def __init__(self, url, offset):
        super().__init__(daemon=True)
        self.url, self.seq = url, offset * 10_000_000
        self.acknowledged, self.statuses = {}, collections.Counter()
        self.stop = threading.Event()

    def run(self):
        session = requests.Session()
        while not self.stop.is_set():
            self.seq += 1
            instance_id = f"f-{self.seq % INSTANCES}"
            body = {"instance_id": instance_id, "snapshot": SNAPSHOT, "metadata": {"report_seq": self.seq}}
            try:
                response = session.post(self.url + "/v1/instance/resource_snapshot", json=body, timeout=10)
            except requests.RequestException:
                self.statuses["no answer"] += 1
                continue
            self.statuses[response.status_code] += 1
            if response.status_code == 200 and response.json() == {"ok": True}:
                self.acknowledged[instance_id] = max(self.seq, self.acknowledged.get(instance_id, 0))


def register(server):
    for n in range(INSTANCES):
        server.post("/v1/instance/register", {"instance_id": f"f-{n}", "host": "10.0.0.1", "port": 9000 + n})


def stream_for(server, seconds, during=None):
    streams = [Stream(server.url, n + 1) for n in range(4)]
    for stream in streams:
        stream.start()
    if during:
        during()
    else:
        time.sleep(seconds)
    for stream in streams:
        stream.stop.set()
        stream.join(30)
    acknowledged, statuses = {}, collections.Counter()
    for stream in streams:
        statuses.update(stream.statuses)
        for instance_id, seq in stream.acknowledged.items():
            acknowledged[instance_id] = max(seq, acknowledged.get(instance_id, 0))
    return acknowledged, statuses


def lost_of(server, acknowledged):
    stored = {row["instance_id"]: row["resource"]["report_seq"] for row in server.get("/v1/instance/list")}
    return {i: seq for i, seq in acknowledged.items() if (stored.get(i) or 0) < seq}


def kill_runs(workdir, runs, seconds):
    server = LiveServer(workdir, roles="proxy", env=ENV).start()
    try:
        register(server)
        total, lost = 0, {}
        for _ in range(runs):
            acknowledged, statuses = stream_for(server, seconds)
            server.kill_everything()
            server.start()
            total += sum(count for status, count in statuses.items() if status == 200)
            lost.update(lost_of(server, acknowledged))
        print(f"kill -9: {runs} runs, {total:,} reports acknowledged, {len(lost)} instances with an acknowledged "
              f"report lost {sorted(lost.items())[:5]}")
    finally:
        server.stop()
        server.database.drop()


def outage(workdir, seconds):
    on_postgres = os.environ.get("DATABASE_URL", "").startswith("postgres")
    cut = outage_on_suite_backend(workdir)
    server = LiveServer(workdir, roles="proxy", database=cut.database, env={**ENV, **cut.env}).start()
    reads = collections.Counter()
    try:
        register(server)

        def during():
            # Every process of up started (the task cluster dies of an outage while it starts: bench/README.md).
            wait_for(lambda: "Fleetwatch is up" in server.log(), timeout_s=60)
            time.sleep(5)
            cut.cut()
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                try:
                    reads[requests.get(server.url + "/v1/instance/list", timeout=10).status_code] += 1
                except requests.RequestException:
                    reads["no answer"] += 1
                time.sleep(0.05)
            cut.restore()
            wait_for(lambda: requests.get(server.url + "/v1/instance/list", timeout=10).ok, timeout_s=60)
            time.sleep(2)

        acknowledged, statuses = stream_for(server, 0, during=during)
        lost = lost_of(server, acknowledged)
        log = server.log_path.read_text(errors="replace")
        print(f"outage of {seconds} s ({'PostgreSQL' if on_postgres else 'SQLite'}): writes {dict(statuses)}, "
              f"reads {dict(reads)}, {len(lost)} acknowledged reports lost; log lines: "
              f"{log.count('database unavailable (')} 'unavailable', {log.count('reachable again')} 'again', "
              f"{log.count('Traceback (most recent call last)')} tracebacks "
              f"(the task cluster's and the recorder's); server still running: {server.running()}")
    finally:
        server.stop()
        cut.close()
        server.database.drop()


def random_value(rng, depth=0):
    kind = rng.randrange(12 if depth < 70 else 8)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 2**31, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**30, rng.randrange(-10**6, 10**6)])
    if kind == 3:
        return rng.choice([1e20, -1e20, 1e300, 5e-324, 0.5, -0.0, 1.7976931348623157e308])
    if kind in (4, 5):
        return rng.choice(["", "x", "\x00", "a\x00b", "é", "🙂", "x" * 300, "10.0.0.1", "hp_x:1", " "])
    if kind in (6, 7):
        return rng.randrange(0, 70000)
    if kind in (8, 9):
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    keys = ["instance_id", "host", "port", "snapshot", "metadata", "inflight", "qps_1m", "capabilities", "tags",
            "meta", "devices", "report_seq", "x"]
    return {rng.choice(keys): random_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def fuzz_body(rng):
    roll = rng.random()
    if roll < 0.02:
        return b'{"instance_id": "' + b"x" * 300_000 + b'"}'  # over the body limit
    if roll < 0.04:
        return b"[" * 100 + b"]" * 100
    if roll < 0.06:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))  # not JSON, maybe not UTF-8
    body = {"instance_id": rng.choice(["f-1", "f-2", "new", "\x00", 7]), "host": "10.0.0.1", "port": 9000}
    extra = random_value(rng)
    if isinstance(extra, dict):
        body.update(extra)
    for _ in range(rng.randrange(4)):
        body[rng.choice(["snapshot", "metadata", "inflight", "qps_1m", "capabilities", "tags", "meta", "port",
                         "pool_resource", "proxy_id"])] = random_value(rng)
    return json.dumps(body).encode()


def fuzz(workdir, count):
    server = LiveServer(workdir, roles="proxy,scheduler", env=ENV).start()
    paths = ["/v1/instance/register", "/v1/instance/heartbeat", "/v1/instance/resource_snapshot",
             "/v1/instance/unregister", "/v1/proxy/register"]
    statuses = collections.Counter()
    try:
        register(server)

        def client(seed, share):
            rng, session = random.Random(seed), requests.Session()
            for _ in range(share):
                try:
                    response = session.post(server.url + rng.choice(paths), data=fuzz_body(rng),
                                            headers={"Content-Type": "application/json"}, timeout=30)
                    statuses[response.status_code] += 1
                except requests.RequestException:
                    statuses["no answer"] += 1

        threads = [threading.Thread(target=client, args=(seed, count // 4)) for seed in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        server_errors = sum(n for status, n in statuses.items() if isinstance(status, int) and status >= 500)
        print(f"fuzz: {sum(statuses.values()):,} bodies, {server_errors} 5xx, {statuses['no answer']} unanswered, "
              f"by status {dict(sorted(statuses.items(), key=str))}; tracebacks in the log: "
              f"{server.log_path.read_text(errors='replace').count('Traceback')}")
    finally:
        server.stop()
        server.database.drop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default="")
    parser.add_argument("--kill-runs", type=int, default=4)
    parser.add_argument("--stream-s", type=float, default=8)
    parser.add_argument("--outage-s", type=float, default=12)
    parser.add_argument("--fuzz", type=int, default=21_000)
    args = parser.parse_args()
    if args.database_url:
        os.environ["DATABASE_URL"] = args.database_url  # LiveDatabase makes a fresh database beside it
    else:
        os.environ.pop("DATABASE_URL", None)
    workdir = Path(tempfile.mkdtemp(prefix="fw-faults-"))
    for name in ("kill", "outage", "fuzz"):
        (workdir / name).mkdir()
    if args.kill_runs:
        kill_runs(workdir / "kill", args.kill_runs, args.stream_s)
    if args.outage_s:
        outage(workdir / "outage", args.outage_s)
    if args.fuzz:
        fuzz(workdir / "fuzz", args.fuzz)


if __name__ == "__main__":
    main()

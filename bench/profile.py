#!/usr/bin/env python
"""Where the time of each hot path goes: the paths of issue 12's table, taken apart in process.

    .venv/bin/python bench/profile.py [--database-url URL] [--pool-size 10000] [--gpus 8] [--calls 2000]
                                      [--cprofile]

No web server and no network: Django's WSGI handler is called as the web
server calls it, then the parts of each path are timed alone. Every figure
is CPU time of this process per call (median of five batches), so it adds
up to what a web worker spends, less the server's own HTTP work (the
difference to ``bench/run.py``'s per-request CPU). On PostgreSQL the
database server's CPU is not in these figures.

For a flame graph of a running worker instead, where py-spy (in the bench
extras) can attach: ``py-spy record -o ingest.svg --pid <granian worker
pid>`` while ``bench/run.py`` loads it. On the VM these figures come from it
could not read the interpreter (a pyenv build), hence this script.
"""

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import run_inside, seed_pool, snapshot_body_template  # noqa: E402

INGEST_PATH = "/v1/instance/resource_snapshot"
HEARTBEAT_PATH = "/v1/instance/heartbeat"
HEARTBEAT_BODY = '{"instance_id": "__ID__", "inflight": 3, "qps_1m": 1.5}'  # bench/run.py's


def per_call_ms(function, calls, batches=5):
    """CPU milliseconds per call of ``function(i)``, the median of ``batches`` batches."""
    return side_by_side([function], calls, batches)[0]


def side_by_side(functions, calls, batches=5):
    """``per_call_ms`` of each function, their batches taking turns so that they meet the same state."""
    figures = [[] for _ in functions]
    for batch in range(batches):
        for function, times in zip(functions, figures):
            start = time.process_time()
            for i in range(calls):
                function(batch * calls + i)
            times.append((time.process_time() - start) / calls * 1000)
    return [statistics.median(times) for times in figures]


def line(what, ms, note=""):
    print(f"  {what:62s} {ms:8.3f} ms  {note}", flush=True)


class Wsgi:
    """Django's WSGI application called directly, one request at a time; or the hot lane in front of it
    (``lane=True``: what ``up`` serves)."""

    def __init__(self, token):
        from django.core.handlers.wsgi import WSGIHandler

        from controlplane.ops.hot_lane import HotLane

        self.handler = WSGIHandler()
        self.lane = HotLane(self.handler)
        self.token = token

    def call(self, method, path, body=b"", token=True, lane=False):
        path, _, query = path.partition("?")
        environ = {
            "REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query, "SCRIPT_NAME": "",
            "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000", "HTTP_HOST": "127.0.0.1:8000",
            "REMOTE_ADDR": "127.0.0.1", "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body), "wsgi.errors": sys.stderr, "wsgi.version": (1, 0),
            "wsgi.multithread": False, "wsgi.multiprocess": True, "wsgi.run_once": False,
            "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(body)),
        }
        if token:
            environ["HTTP_AUTHORIZATION"] = f"Bearer {self.token}"
        status = []
        response = (self.lane if lane else self.handler)(environ, lambda s, headers, exc_info=None: status.append(s))
        content = b"".join(response)
        response.close()
        if not status[0].startswith("2"):
            raise SystemExit(f"{method} {path}: {status[0]} {content[:300]!r}")
        return content


def request_floor(args, wsgi):
    """Ingest against /healthz, and the parts of ingest alone."""
    import orjson
    from django.conf import settings
    from django.db import transaction

    from controlplane import clock
    from controlplane.api.auth import verify_token
    from proxy_app.ingest.normalise import normalise_snapshot
    from proxy_app.ingest.store import ingest_snapshot
    from proxy_app.models import Instance

    template = snapshot_body_template(args.gpus)

    def reports(first_seq):  # each instance's report_seq rises, so every report is stored
        return [template.replace("__ID__", f"bench-{i % 1000}").replace("__SEQ__", str(first_seq + i)).encode()
                for i in range(5 * args.calls)]

    bodies, bodies_off = reports(10**6), reports(2 * 10**6)
    bodies_lane, bodies_django = reports(4 * 10**6), reports(5 * 10**6)
    for i in range(1000):
        wsgi.call("POST", "/v1/instance/register", orjson.dumps({"instance_id": f"bench-{i}", "host": "10.0.0.1",
                                                                    "port": 8000 + i}))
    print(f"request path ({args.gpus}-GPU snapshot, {len(bodies[0]):,} bytes; CPU per call, median of 5 batches)")
    healthz = per_call_ms(lambda i: wsgi.call("GET", "/healthz", token=False), args.calls)
    line("GET /healthz through Django's WSGI handler", healthz)

    def auth_off(i):
        settings.FLEETWATCH_AUTH = False
        try:
            wsgi.call("POST", INGEST_PATH, bodies_off[i], token=False)
        finally:
            settings.FLEETWATCH_AUTH = True

    ingest, off = side_by_side([lambda i: wsgi.call("POST", INGEST_PATH, bodies[i]), auth_off], args.calls)
    line("POST resource_snapshot (auth on) through the handler", ingest, f"{ingest / healthz:.2f}× /healthz")
    line("POST resource_snapshot, auth off", off, f"auth costs {ingest - off:+.3f} ms")
    lane, django = side_by_side([lambda i: wsgi.call("POST", INGEST_PATH, bodies_lane[i], lane=True),
                                 lambda i: wsgi.call("POST", INGEST_PATH, bodies_django[i])], args.calls)
    line("POST resource_snapshot through the hot lane (what up serves)", lane,
         f"{lane / healthz:.2f}× Django's /healthz, {lane / django:.2f}× through Django")
    line("  the token check alone (cached)", per_call_ms(lambda i: verify_token(wsgi.token), args.calls))
    beats = [HEARTBEAT_BODY.replace("__ID__", f"bench-{i % 1000}").encode() for i in range(5 * args.calls)]
    beat = per_call_ms(lambda i: wsgi.call("POST", HEARTBEAT_PATH, beats[i], lane=True), args.calls)
    line("POST /v1/instance/heartbeat through the hot lane", beat, f"{beat / lane:.2f}× a snapshot's")
    load = {"inflight": 3, "qps_1m": 1.5}
    line("  Instance.objects.heartbeat() alone", per_call_ms(
        lambda i: Instance.objects.heartbeat(f"bench-{i % 1000}", clock.now(), load), args.calls))
    if args.cprofile:
        lane_profile(wsgi, INGEST_PATH, bodies_lane[4 * args.calls:], args.calls)
        lane_profile(wsgi, HEARTBEAT_PATH, beats, args.calls)
    wal_pages(wsgi, reports(6 * 10**6)[:args.calls])

    payloads = [orjson.loads(body) for body in bodies]
    now = clock.now()
    store = per_call_ms(lambda i: ingest_snapshot(payloads[i]["instance_id"], payloads[i]["snapshot"],
                                                  {**payloads[i]["metadata"], "report_seq": 3 * 10**6 + i}, now),
                        args.calls)
    line("  ingest_snapshot() alone: normalise, encode, store", store)
    normalise = per_call_ms(lambda i: normalise_snapshot(payloads[i]["snapshot"], payloads[i]["metadata"], now),
                            args.calls)
    line("    normalise_snapshot()", normalise)
    columns = normalise_snapshot(payloads[0]["snapshot"], payloads[0]["metadata"], now)
    line("    orjson.dumps of the snapshot to store",
         per_call_ms(lambda i: orjson.dumps(columns["raw_resource"]), args.calls))
    line("    the database statements and commit (the rest)", store - normalise)

    def empty_transaction(i):
        with transaction.atomic():
            pass

    line("      an empty write transaction", per_call_ms(empty_transaction, args.calls))
    line("  orjson.loads of the request body", per_call_ms(lambda i: orjson.loads(bodies[i]), args.calls))
    line("  framework: the handler's share beyond ingest_snapshot()", ingest - store,
         f"({healthz:.3f} ms of it is /healthz's floor)")


def wal_pages(wsgi, bodies):
    """SQLite: the pages a report writes to the write-ahead log (each commit appends every page it changed)."""
    from django.db import connection

    if connection.vendor != "sqlite":
        return
    def checkpoint(mode):
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA wal_checkpoint({mode})")
            return cursor.fetchone()[1]

    def autocheckpoint(pages):
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA wal_autocheckpoint={pages}")

    checkpoint("TRUNCATE")
    autocheckpoint(0)  # the log grows through the batch instead of being copied back and restarted
    try:
        for body in bodies:
            wsgi.call("POST", INGEST_PATH, body, lane=True)
        frames = checkpoint("PASSIVE")
    finally:
        autocheckpoint(1000)
    print(f"  {'  pages each report writes to the WAL (4 KiB each)':62s} {frames / len(bodies):8.2f}", flush=True)


def cprofile_calls(call, calls, what, rows=18):
    """cProfile of ``call(i)`` for i below ``calls``: the functions taking the most time of their own."""
    here = str(Path(__file__).resolve().parent)  # this file is "profile" on sys.path: cProfile needs the real one
    sys.path[:] = [entry for entry in sys.path if str(Path(entry or ".").resolve()) != here]
    sys.modules.pop("profile", None)
    import cProfile
    import pstats

    print(f"  cProfile of {calls:,} {what}, by time of their own", flush=True)
    profiler = cProfile.Profile()
    profiler.enable()
    for i in range(calls):
        call(i)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(rows)
    print("\n".join("    " + text for text in out.getvalue().splitlines()[6:]), flush=True)


def lane_profile(wsgi, path, bodies, calls):
    """cProfile of ``calls`` requests to ``path`` through the hot lane."""
    cprofile_calls(lambda i: wsgi.call("POST", path, bodies[i], lane=True), calls, f"POST {path} through the hot lane")


def pool_summary(args, wsgi):
    """pool_resource fresh through the handler, and its parts: the read of the changed rows, the sums over
    the columns, and a read of the whole pool (what a fresh process, or the full read every 30 s, costs)."""
    from django.db.models import F, Max

    from controlplane import clock
    from proxy_app.models import Instance
    from proxy_app.pool.columns import LEDGER
    from proxy_app.pool.summary import pool_resource

    # The pool as seeded, moved to now: the parts above took longer than the TTL.
    now = clock.now()
    Instance.objects.update(last_seen_at=F("last_seen_at") + (now - Instance.objects.aggregate(Max("last_seen_at"))[
        "last_seen_at__max"]))
    count = Instance.objects.count()
    calls = max(5, args.calls // 200)
    print(f"pool_resource over {count:,} instances (CPU per call, median of 5 batches of {calls})")
    line("GET /debug/pool_resource through the hot lane (what up serves)", per_call_ms(
        lambda i: wsgi.call("GET", "/debug/pool_resource", lane=True), calls))
    line("  pool_resource() fresh, as the view computes it", per_call_ms(lambda i: pool_resource(clock.now()), calls))
    line("    the read of the rows changed since the last (none here)", per_call_ms(
        lambda i: LEDGER._read_changed(clock.now() - 0.5), calls))
    line("    the sums over the columns", per_call_ms(
        lambda i: LEDGER.board.totals(clock.now(), Instance.ttl_s(), 5.0, 0.8), calls))
    line("  a read of the whole pool (a fresh process; every 30 s)", per_call_ms(lambda i: LEDGER._read_all(), calls))


def full_list(args, wsgi):
    """The full /v1/instance/list: fetching the rows, building them, encoding the answer."""
    import orjson

    from controlplane import clock
    from controlplane.series.queries import raw_rows
    from proxy_app.api.listing import LIST_ROW, instance_list_json, instance_rows
    from proxy_app.models import Instance

    now = clock.now()
    queryset = Instance.objects.in_view(True, now)
    size = len(wsgi.call("GET", "/v1/instance/list?include_dead=true"))
    print(f"full /v1/instance/list ({size / 2**20:.0f} MB; CPU per call, median of 5 batches of 2)")
    line("GET /v1/instance/list?include_dead=true through the handler", per_call_ms(
        lambda i: wsgi.call("GET", "/v1/instance/list?include_dead=true"), 2))
    line("  fetch the rows from the driver", per_call_ms(
        lambda i: raw_rows(LIST_ROW.query(queryset)), 2))
    line("  instance_rows(): fetch and build the rows", per_call_ms(lambda i: instance_rows(queryset, now), 2))
    rows = instance_rows(queryset, now)
    line("  orjson.dumps of the built rows", per_call_ms(lambda i: orjson.dumps(rows), 2))

    line("  instance_list_json(): the same three, the garbage collector paused (what the view calls)",
         per_call_ms(lambda i: instance_list_json(queryset, now), 2))
    line("GET one page of 100 at offset 5,000", per_call_ms(
        lambda i: wsgi.call("GET", "/v1/instance/list?include_dead=true&limit=100&offset=5000"), 20))


def inside(args):
    import django

    django.setup()
    wsgi = Wsgi(args.token)
    request_floor(args, wsgi)
    pool_summary(args, wsgi)
    full_list(args, wsgi)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument("--pool-size", type=int, default=10_000)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per snapshot: 8 ≈ 7 KB, 1 ≈ 1.8 KB")
    parser.add_argument("--calls", type=int, default=2000, help="calls per batch of the request path")
    parser.add_argument("--cprofile", action="store_true", help="also a cProfile of the lane's reports and heartbeats")
    parser.add_argument("--token", help=argparse.SUPPRESS)  # set for the inner process
    args = parser.parse_args()
    if args.token:
        return inside(args)
    def seed(deployment):
        seed_pool(deployment, args.pool_size, args.gpus)
        print(f"database {deployment.vendor}; {args.pool_size:,} seeded instances", flush=True)

    run_inside(__file__, args.database_url, "profile",
               ["--pool-size", args.pool_size, "--gpus", args.gpus, "--calls", args.calls,
                *(["--cprofile"] if args.cprofile else [])], prepare=seed)


if __name__ == "__main__":
    main()

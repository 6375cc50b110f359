#!/usr/bin/env python
"""Web CPU of a snapshot report with this tree's ingest SQL against another revision's, side by side.

    .venv/bin/python bench/ingest_statement.py --before main --database-url postgres://…/fw_ingest \\
        [--gpus 1] [--calls 1000]

One process, one fresh database: the other revision's ``proxy_app/ingest/sql.py``
(``git show REV:…``) is loaded beside this tree's, and their batches take
turns (``bench/profile.py``'s ``side_by_side``): each report once through the
hot lane, as ``up`` serves it, with one module's statement builder or the
other's; then ``touch_and_store()`` of each module alone. Figures are CPU of
this process per report (median of 5 batches); the database server's CPU is
not in them. Written for issue 33: PostgreSQL's one ingest statement had
grown past the 4,096 bytes whose parse psycopg caches.
"""

import argparse
import subprocess
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import run_inside, snapshot_body_template  # noqa: E402
from bench.profile import INGEST_PATH, Wsgi, line, side_by_side  # noqa: E402

SQL_MODULE = "proxy_app/ingest/sql.py"


def other_module(revision):
    """``proxy_app.ingest.sql`` as it is at ``revision``, loaded as a module of its own."""
    source = subprocess.run(["git", "show", f"{revision}:{SQL_MODULE}"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    module = types.ModuleType(f"ingest_sql_at_{revision}")
    exec(compile(source, f"{revision}:{SQL_MODULE}", "exec"), module.__dict__)
    return module


def inside(args):
    import django

    django.setup()
    import orjson
    from django.db import connection

    from controlplane import clock
    from proxy_app.ingest import sql as this
    from proxy_app.ingest.normalise import normalise_snapshot

    before = other_module(args.before)
    wsgi = Wsgi(args.token)
    for i in range(1000):
        wsgi.call("POST", "/v1/instance/register", orjson.dumps({"instance_id": f"bench-{i}", "host": "10.0.0.1",
                                                                    "port": 8000 + i}))
    template = snapshot_body_template(args.gpus, engines=1)
    # Call i of side s reports report_seq 2i + s: every report is newer than its instance's last, on either side.
    bodies = [[template.replace("__ID__", f"bench-{i % 1000}").replace("__SEQ__", str(10**6 + 2 * i + side)).encode()
               for i in range(5 * args.calls)] for side in (0, 1)]
    fields = ("had_ok_engine",)  # the report has an ok engine: the longer of the two statements
    for name, module in ((args.before, before), ("this tree", this)):
        statement = module._touch_and_store_sql(connection.vendor, fields)
        print(f"{name}: ingest statement {len(statement.encode()):,} bytes", flush=True)

    builders = (before._touch_and_store_sql, this._touch_and_store_sql)

    def lane(side):
        def report(i):
            this._touch_and_store_sql = builders[side]  # what touch_and_store() calls
            wsgi.call("POST", INGEST_PATH, bodies[side][i], lane=True)
        return report

    print(f"{len(bodies[0][0]):,}-byte report, {connection.vendor}; CPU of this process per report, "
          f"median of 5 batches of {args.calls}, the two sides taking turns", flush=True)
    old, new = side_by_side([lane(0), lane(1)], args.calls)
    this._touch_and_store_sql = builders[1]
    line(f"POST resource_snapshot through the hot lane, {args.before}'s statement", old)
    line("POST resource_snapshot through the hot lane, this tree's statement", new,
         f"{new / old:.2f}×, {new - old:+.3f} ms")

    payload = orjson.loads(bodies[0][0])
    columns = normalise_snapshot(payload["snapshot"], payload["metadata"], clock.now())
    raw = orjson.dumps(columns["raw_resource"]).decode()

    def store(module, side):
        def call(i):
            columns["report_seq"] = 2 * 10**6 + 2 * i + side
            if module.touch_and_store(f"bench-{i % 1000}", columns, raw, clock.now()) != (1, 1):
                raise SystemExit("a report was not stored")
        return call

    old, new = side_by_side([store(before, 0), store(this, 1)], args.calls)
    line(f"  touch_and_store() alone, {args.before}'s", old)
    line("  touch_and_store() alone, this tree's", new, f"{new / old:.2f}×, {new - old:+.3f} ms")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default="main", help="the revision to compare with (git)")
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument("--gpus", type=int, default=1, help="GPUs per snapshot: 1 ≈ 1.8 KB (the soak's size)")
    parser.add_argument("--calls", type=int, default=1000, help="reports per batch")
    parser.add_argument("--token", help=argparse.SUPPRESS)  # set for the inner process
    args = parser.parse_args()
    if args.token:
        return inside(args)
    run_inside(__file__, args.database_url, "ingest-statement",
               ["--before", args.before, "--gpus", args.gpus, "--calls", args.calls])


if __name__ == "__main__":
    main()

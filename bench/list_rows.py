#!/usr/bin/env python
"""CPU of the answers built from their declarations, in process: this tree against another, side by side (issue 29).

    .venv/bin/python bench/list_rows.py --base /path/to/other/tree [--pool-size 1000] [--rounds 2]

One fresh SQLite database is seeded with ``--pool-size`` reporting instances
(``seed_pool``; nine in ten of them with capabilities of one fingerprint), then
each tree takes its turn in a process of its own, ``--rounds`` times:
the rows are fetched once, and the figures are CPU time per call, the median
of five batches of 20 calls:

- ``build``: the row builder alone over the fetched rows (no database);
- ``list``: ``instance_list_json`` (fetch, build, encode: what the view calls);
- ``summary``: the pool summary's builder alone over the pool's totals (``build_pool_resource``);
- ``pool_resource``: ``pool_resource()`` (the columns brought up to date, totals, build: what the link
  sends each heartbeat and the pages read), 200 calls a batch.
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CAPABILITIES = """
import django
django.setup()
from agent.capabilities import fingerprint
from proxy_app.models import Instance
capabilities = {
    "schema_version": "1", "model": {"identifier": "meta-llama/Llama-3.1-8B-Instruct", "revision": "main"},
    "tokenizer": {"identifier": "meta-llama/Llama-3.1-8B-Instruct", "revision": None},
    "kv_cache": {"layout": "paged", "schema_version": "1", "dtype": "bfloat16", "block_size": 16},
}
ids = [pk for pk in Instance.objects.values_list("pk", flat=True) if int(pk.rsplit("-", 1)[1]) % 10]
Instance.objects.filter(pk__in=ids).update(capabilities=capabilities, capability_fingerprint=fingerprint(capabilities))
"""


def builder_of(listing, now):
    """The tree's row builder and the fetched rows it reads (a tree before issue 29's declared rows had
    ``_ListRows``; one after has ``LIST_ROW``)."""
    from controlplane.series.queries import raw_rows
    from proxy_app.models import Instance

    queryset = Instance.objects.all()
    if hasattr(listing, "LIST_ROW"):
        return listing.list_builder(now), raw_rows(listing.LIST_ROW.query(queryset))
    fetched = raw_rows(listing._with_text_columns(queryset, raw=True).values_list(*listing.COLUMNS, "raw_text"))
    return listing._ListRows(now).build, fetched


def summary_builder():
    """The tree's pool summary builder (a tree before issue 29's fifth step built it in ``aggregation``)."""
    try:
        from proxy_app.pool.answers import build_pool_resource
    except ImportError:
        from proxy_app.pool.aggregation import build_pool_resource
    return build_pool_resource


def per_call_ms(function, calls=20, batches=5):
    times = []
    for _ in range(batches):
        start = time.process_time()
        for _ in range(calls):
            function()
        times.append((time.process_time() - start) / calls * 1000)
    return statistics.median(times)


def inside():
    import django

    django.setup()
    from controlplane import clock
    from proxy_app.api import listing
    from proxy_app.models import Instance
    from proxy_app.pool.summary import pool_resource, pool_totals

    now = clock.now()
    build, fetched = builder_of(listing, now)
    queryset = Instance.objects.all()
    assert len(build(fetched)) == len(fetched) == Instance.objects.count()
    totals, build_summary = pool_totals(now), summary_builder()
    summary = build_summary(totals, now=now, ttl_s=30, capacity=8, proxy_id="bench")
    assert summary["instances"]["total"] == pool_resource(now)["instances"]["total"] == len(fetched)
    figures = (per_call_ms(lambda: build(fetched)), per_call_ms(lambda: listing.instance_list_json(queryset, now)),
               per_call_ms(lambda: build_summary(totals, now=now, ttl_s=30, capacity=8, proxy_id="bench"), 2000),
               per_call_ms(lambda: pool_resource(now), 200))
    print(" ".join(f"{figure:.4f}" for figure in figures))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", help="the other tree (a checkout of the reference commit)")
    parser.add_argument("--pool-size", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        return inside()
    if not args.base:
        parser.error("--base is needed")
    sys.path.insert(0, str(ROOT))
    from bench.common import PYTHON, Deployment, seed_pool

    deployment = Deployment()
    try:
        seed_pool(deployment, args.pool_size, 8)
        deployment.python(CAPABILITIES)
        trees = {"base": Path(args.base).resolve(), "this tree": ROOT}
        figures = {name: [] for name in trees}
        for _ in range(args.rounds):
            for name, tree in trees.items():
                env = {**deployment.env, "PYTHONPATH": str(tree)}
                result = subprocess.run([PYTHON, __file__, "--inside"], env=env, cwd=tree, capture_output=True,
                                        text=True)
                if result.returncode:
                    raise SystemExit(f"{name} failed:\n{result.stderr[-3000:]}")
                figures[name].append(tuple(map(float, result.stdout.split())))
        print(f"{args.pool_size:,} instances on SQLite; CPU per call, ms (median of 5 batches of 20), by round")
        whats = ("row builder alone", "instance_list_json (fetch, build, encode)", "pool summary builder alone",
                 "pool_resource() (columns, totals, build)")
        for index, what in enumerate(whats):
            digits = 2 if index < 2 else 4
            cells = "  ".join(f"{name}: " + " / ".join(f"{round_[index]:.{digits}f}" for round_ in rounds)
                              for name, rounds in figures.items())
            print(f"  {what:44s} {cells}")
        print("(the last two in ms too: per call, median of 5 batches of 2,000 and of 200 calls)")
    finally:
        deployment.cleanup()


if __name__ == "__main__":
    main()

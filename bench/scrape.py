#!/usr/bin/env python
"""What one scrape of a Proxy's ``/metrics`` costs at a pool size: CPU, bytes, lines.

    .venv/bin/python bench/scrape.py [--instances 1000] [--gpus 8] [--rounds 5] [--database-url URL]

A fresh deployment (SQLite by default) with ``--instances`` reporting hosts
of ``--gpus`` GPUs each written straight into the database (``seed_pool``,
5 % of them stale) and one recorded pool row; then, in one process, the
Proxy's collector is scraped ``--rounds`` times as ``/metrics`` does
(``generate_latest``), the hosts seen again before each round so they stay
alive. Prints the median CPU per scrape and the size of the text. The ingest
path does no work for ``/metrics``: this is the whole cost, paid per scrape.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Deployment, seed_pool  # noqa: E402

SCRAPE = r"""
import statistics, sys, time
import django
django.setup()
from prometheus_client import CollectorRegistry, generate_latest
from proxy_app.ops.history import record_pool
from proxy_app.ops.metrics import ProxyCollector
from proxy_app.models import Instance

rounds = int(sys.argv[1])
record_pool()
seconds = []
for _ in range(rounds):
    Instance.objects.filter(last_seen_at__gte=time.time() - 300).update(last_seen_at=time.time())
    registry = CollectorRegistry()
    registry.register(ProxyCollector())
    started = time.process_time()
    body = generate_latest(registry)
    seconds.append(time.process_time() - started)
print(round(statistics.median(seconds) * 1000), len(body), len(body.splitlines()))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    deployment = Deployment(args.database_url, roles="proxy")
    try:
        seed_pool(deployment, args.instances, gpus=args.gpus)
        cpu_ms, size, lines = deployment.python(SCRAPE, args.rounds).split()
    finally:
        deployment.cleanup()
    print(f"{deployment.vendor}, {args.instances} hosts x {args.gpus} GPUs: {cpu_ms} ms CPU per scrape "
          f"(median of {args.rounds}), {int(size) / 1e6:.1f} MB, {lines} lines")


if __name__ == "__main__":
    main()

"""What the simulated engines cost the simulator, and what their figures look like across a fleet.

Cost: builds the same seeded fleet twice (``--no-engines`` and the default),
then, taking turns, builds and JSON-encodes every host's report body for a
number of one-second slots, in this process, with no network. Prints the
CPU time per report (median of the rounds) and the body size of each, and
the ratio.

    python bench/simulator_engines.py [--hosts 200] [--slots 50] [--rounds 5]

Figures (``--figures``): one seeded fleet at the defaults for ``--slots``
one-second slots; prints how often queues form, KV usage and TTFT p95
quantiles and the share of failed scrapes (``docs/simulator.md`` quotes
``--figures --hosts 100 --slots 600 --seed 3``).
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simulator.model import FleetProfile, build_fleet  # noqa: E402

T0_MS = 1_800_000_000_000


def one_round(engines, hosts, slots, start_slot):
    """``(CPU ms per report, mean body bytes)`` of ``slots`` report slots of a fresh seeded fleet."""
    fleet = build_fleet(range(hosts), hosts, seed=0, profile=FleetProfile(engines=engines))
    for host in fleet:  # the first report has no rates: leave it out
        host.report_body(T0_MS + start_slot * 1000)
    size = 0
    started = time.process_time()
    for slot in range(start_slot + 1, start_slot + 1 + slots):
        for host in fleet:
            size += len(json.dumps(host.report_body(T0_MS + slot * 1000)))
    elapsed = time.process_time() - started
    return elapsed * 1000.0 / (hosts * slots), size / (hosts * slots)


def figures(hosts, slots, seed):
    fleet = build_fleet(range(hosts), hosts, seed=seed)
    objects = [obj for slot in range(slots) for host in fleet
               for obj in host.snapshot(T0_MS + slot * 1000).get("engines", [])]
    ok = [obj for obj in objects if obj["status"] == "ok"]
    waiting = [obj["requests_waiting"] for obj in ok]
    deciles = statistics.quantiles([obj["kv_cache_usage_ratio"] for obj in ok], n=10)
    ttft = statistics.quantiles([obj["ttft_p95_s"] for obj in ok if obj["ttft_p95_s"] is not None], n=10)
    statuses = collections.Counter(obj["status"] for obj in objects)
    print(f"{hosts} hosts x {slots} slots, seed {seed}: {len(objects)} engine objects")
    print(f"  waiting > 0: {sum(n > 0 for n in waiting) / len(waiting):.1%}, >= 32: "
          f"{sum(n >= 32 for n in waiting) / len(waiting):.1%}, max {max(waiting)}")
    print(f"  KV usage deciles: {', '.join(f'{q:.2f}' for q in deciles)}")
    print(f"  TTFT p95 deciles (s): {', '.join(f'{q:.2f}' for q in ttft)}")
    print(f"  failed scrapes: {1 - statuses['ok'] / len(objects):.1%} {dict(statuses)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--slots", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--figures", action="store_true", help="the fleet's engine figures instead of the cost")
    parser.add_argument("--seed", type=int, default=3, help="the fleet's seed, with --figures")
    args = parser.parse_args()
    if args.figures:
        return figures(args.hosts, args.slots, args.seed)
    results = {False: [], True: []}
    for number in range(args.rounds):
        for engines in ((False, True) if number % 2 == 0 else (True, False)):
            results[engines].append(one_round(engines, args.hosts, args.slots, number))
    cpu = {engines: statistics.median(ms for ms, _ in rounds) for engines, rounds in results.items()}
    size = {engines: rounds[0][1] for engines, rounds in results.items()}
    print(f"{args.hosts} hosts x {args.slots} slots, {args.rounds} rounds (median CPU per report)")
    print(f"  without engines: {cpu[False]:.3f} ms, {size[False]:.0f} B")
    print(f"  with engines:    {cpu[True]:.3f} ms, {size[True]:.0f} B")
    print(f"  engines add:     {cpu[True] - cpu[False]:.3f} ms ({cpu[True] / cpu[False]:.2f} x), "
          f"{size[True] - size[False]:.0f} B")


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""CPU of a placement's answer body, in process: this tree against another, side by side (issue 29).

    .venv/bin/python bench/answer_bodies.py --base /path/to/other/tree [--rounds 3] [--calls 20000]

No database and no server: one decision of each role with three candidates
(the Proxy's with a prompt, so its answer carries ``prompt_blocks`` and
``prefix_source``), built by the tree's ``placement_body`` and
``pool_placement_body`` alone, then built and encoded (``renderers.dumps``, what
``placement_response`` writes). Each tree takes its turn in a process of its
own, ``--rounds`` times; a figure is CPU time per call, the median of seven
batches of ``--calls`` (the four taking turns, ``bench.profile.side_by_side``).
The trees' bodies are checked byte for byte equal.
"""

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOW = 1767225600.5


def decisions():
    from controlplane.endpoints.placement import Decision, Verdict
    from proxy_app.placement.inputs import Candidate, Ranked
    from scheduler_app.placement import PoolCandidate, RankedPool

    ranked = [Ranked(Candidate(f"gpu-node-{i}", f"10.0.0.{i}", 8000 + i, 1.0, endpoints=("/v1/chat",),
                               requests_waiting=i, requests_running=2, kv_cache_usage_ratio=0.25),
                     0, 0.31 + i, 0.4, ("lowest_pressure",), prefix_hit_blocks=i) for i in range(3)]
    pools = [RankedPool(PoolCandidate(f"pool-{i}", f"10.0.1.{i}", 9000 + i, 1.0, saturation=0.2,
                                      pool_admission_state="accepting"), 0.5, ("lowest_saturation",))
             for i in range(3)]
    return (Decision(Verdict.ACCEPT, "lowest_pressure", 10, 8, {"fenced": 2}, ranked, prompt_blocks=4,
                     prefix_source="events"),
            Decision(Verdict.ACCEPT, "lowest_saturation", 10, 8, {"stale": 2}, pools))


def inside(calls):
    import django

    django.setup()
    from bench.profile import side_by_side as taking_turns
    from controlplane.api.renderers import dumps
    from proxy_app.api.placement import placement_body
    from scheduler_app.placement_api import pool_placement_body

    instance, pool = decisions()
    figures = [ms * 1000 for ms in taking_turns([
        lambda i: placement_body(instance, NOW), lambda i: dumps(placement_body(instance, NOW)),
        lambda i: pool_placement_body(pool, NOW), lambda i: dumps(pool_placement_body(pool, NOW))], calls, batches=7)]
    print(" ".join(f"{figure:.3f}" for figure in figures))
    print(dumps(placement_body(instance, NOW)).decode())
    print(dumps(pool_placement_body(pool, NOW)).decode())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--base", help="the other tree (a checkout of the reference commit)")
    for option, default in (("--rounds", 3), ("--calls", 20000)):
        parser.add_argument(option, type=int, default=default)
    args = parser.parse_args()
    if args.inside:
        return inside(args.calls)
    if not args.base:
        parser.error("--base is needed")
    side_by_side(args)


def side_by_side(args):
    """Each tree in a process of its own, ``args.rounds`` times; the figures by round, the bodies checked equal."""
    trees = {"base": Path(args.base).resolve(), "this tree": ROOT}
    figures, bodies = {name: [] for name in trees}, {}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            env = {**os.environ, "PYTHONPATH": str(tree), "DJANGO_SETTINGS_MODULE": "controlplane.settings"}
            result = subprocess.run([sys.executable, __file__, "--inside", f"--calls={args.calls}"], env=env,
                                    cwd=tree, capture_output=True, text=True)
            if result.returncode:
                raise SystemExit(f"{name} failed:\n{result.stderr[-3000:]}")
            first, *answers = result.stdout.splitlines()
            figures[name].append(tuple(map(float, first.split())))
            bodies.setdefault(name, answers)
    assert bodies["base"] == bodies["this tree"], "the trees' bodies differ"
    print(f"CPU per placement answer (3 candidates), µs (median of 7 batches of {args.calls:,}), by round")
    whats = ("Proxy: placement_body", "Proxy: placement_body + dumps", "Scheduler: pool_placement_body",
             "Scheduler: pool_placement_body + dumps")
    for index, what in enumerate(whats):
        cells = "  ".join(f"{name}: " + " / ".join(f"{round_[index]:.2f}" for round_ in rounds)
                          for name, rounds in figures.items())
        print(f"  {what:40s} {cells}")
    print("(the bodies of both trees are byte for byte the same)")


if __name__ == "__main__":
    main()

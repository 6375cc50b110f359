"""The agent's Prometheus text reader against prometheus_client's parser, on the real captures.

For each capture in ``tests/agent/data/engines/`` (vLLM 0.32 busy and idle,
the SGLang fixtures) this measures, in one process and taking turns:

- ``prometheus_client.parser.text_string_to_metric_families`` over the
  whole text (what reading it with the kept parser costs);
- ``agent.engines.exposition.parse_samples`` limited to SPEC 13's families;
- the agent's whole per-scrape work on the text: parse, one reading per
  engine, the windowed figures (``EngineTracker.observe``).

It first checks that both parsers give the same samples for the families
the agent reads (the test suite checks it too), then prints the CPU time per
call (median of the rounds) and the ratio.

    python bench/exposition.py [--rounds 15] [--calls 50]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from agent.engines.exposition import parse_samples  # noqa: E402
from agent.engines.figures import EngineTracker  # noqa: E402
from agent.engines.reading import SGLANG, VLLM  # noqa: E402

CAPTURES = ROOT / "tests" / "agent" / "data" / "engines"
FILES = [("vllm-0.32.0-cpu-busy.prom", VLLM), ("vllm-0.32.0-cpu-idle.prom", VLLM),
         ("sglang-dp2-a.prom", SGLANG), ("sglang-dp2-b.prom", SGLANG)]


def reference_samples(text, wanted):
    return {(s.name, tuple(sorted(s.labels.items())), repr(s.value))
            for family in text_string_to_metric_families(text) for s in family.samples if s.name in wanted}


def our_samples(text, wanted):
    return {(name, tuple(sorted(labels.items())), repr(value))
            for name, group in parse_samples(text, wanted).items() for labels, value in group}


def cpu_ms_per_call(function, calls):
    started = time.process_time()
    for _ in range(calls):
        function()
    return (time.process_time() - started) * 1000.0 / calls


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args(argv)
    print(f"Python {sys.version.split()[0]}; CPU ms per call, median of {args.rounds} rounds of {args.calls}")
    print(f"{'capture':28} {'lines':>6} {'samples':>8} {'prometheus_client':>18} {'agent parse':>12} "
          f"{'ratio':>7} {'agent scrape work':>18}")
    ok = True
    for name, sources in FILES:
        text = (CAPTURES / name).read_text()
        same = our_samples(text, sources.wanted) == reference_samples(text, sources.wanted)
        ok &= same
        tracker = EngineTracker("http://bench", 10_000)
        clock = iter(range(0, 10**9, 1000))
        timings = {"reference": [], "ours": [], "work": []}
        for _ in range(args.rounds):
            timings["reference"].append(cpu_ms_per_call(lambda: list(text_string_to_metric_families(text)),
                                                        max(1, args.calls // 5)))
            timings["ours"].append(cpu_ms_per_call(lambda: parse_samples(text, sources.wanted), args.calls))
            timings["work"].append(cpu_ms_per_call(lambda: tracker.observe(text, next(clock), 0, 1.0), args.calls))
        reference, ours, work = (statistics.median(timings[key]) for key in ("reference", "ours", "work"))
        samples = sum(1 for _ in our_samples(text, sources.wanted))
        print(f"{name:28} {len(text.splitlines()):>6} {samples:>8} {reference:>15.3f} ms {ours:>9.3f} ms "
              f"{reference / ours:>6.1f}x {work:>15.3f} ms" + ("" if same else "   SAMPLES DIFFER"))
    print("same samples as prometheus_client on every capture" if ok else "FAIL: the parsers disagree")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

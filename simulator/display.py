"""The live progress view and the final summary (rich).

On a terminal the view is a table redrawn twice a second; elsewhere (a pipe,
a CI log) one plain line is printed every ``plain_every_s`` seconds instead.
A run with ``--duration`` shows how far it is, as a bar and the time left
on a terminal, as ``left=`` in the plain line.
Rates in the view are over the last few seconds; the summary's are over the
whole run.
"""

from __future__ import annotations

import time
from collections import deque

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from simulator.hints import hints
from simulator.stats import REQUESTS, FleetStats

RATE_WINDOW_S = 5.0


def _ms(value):
    return "–" if value is None else f"{value:.1f}"


def _clock(seconds):
    seconds = int(seconds)
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _left_s(config, stats):
    """Seconds of reporting left in a ``--duration`` run; None for a run until Ctrl-C or a round count."""
    if config.duration_s is None:
        return None
    return max(0.0, config.duration_s - stats.elapsed_s)


def _counts(counter):
    return ", ".join(f"{name} {count}" for name, count in sorted(counter.items()) if count) or "none"


class ProgressView:
    """What the run is doing now; ``update(stats)`` with cumulative stats, from one thread."""

    def __init__(self, config, console: Console | None = None, enabled=True, plain_every_s=10.0, clock=time.monotonic):
        self.config = config
        self.console = console or Console(stderr=True)
        self.enabled = enabled
        self.plain_every_s = plain_every_s
        self._clock = clock
        self._live = None
        self._history = deque()  # (elapsed_s, acked per request)
        self._last_plain = None
        self._printed_final = False

    def __enter__(self):
        if self.enabled and self.console.is_terminal:
            self._live = Live(Text("starting…"), console=self.console, auto_refresh=False, transient=False)
            self._live.start()
        return self

    def __exit__(self, *exc):
        if self._live is not None:
            self._live.stop()
            self._live = None

    def update(self, stats: FleetStats):
        if not self.enabled:
            return
        acked = {request: stats.acknowledged(request) for request in REQUESTS}
        self._history.append((stats.elapsed_s, acked))
        while len(self._history) > 2 and self._history[1][0] <= stats.elapsed_s - RATE_WINDOW_S:
            self._history.popleft()
        if self._live is not None:
            self._live.update(self.render(stats), refresh=True)
            return
        now = self._clock()
        if self._printed_final:
            return
        if stats.finished or self._last_plain is None or now - self._last_plain >= self.plain_every_s:
            self._last_plain = now
            self._printed_final = stats.finished
            self.console.print(self.plain_line(stats), highlight=False, soft_wrap=True)

    def recent_rate(self, request):
        """Acknowledged ``request``s per second over the last few seconds; None before two updates."""
        if len(self._history) < 2:
            return None
        (t0, first), (t1, last) = self._history[0], self._history[-1]
        return (last[request] - first[request]) / (t1 - t0) if t1 > t0 else None

    def target_rate(self):
        return self.config.instances * 1000.0 / self.config.interval_ms

    def render(self, stats: FleetStats):
        config = self.config
        head = Text.assemble(
            ("Fleetwatch simulator ", "bold"), f"→ {config.proxy_url}   ",
            f"{config.instances} instances every {config.interval_ms} ms, {config.processes} process(es)\n",
            f"elapsed {_clock(stats.elapsed_s)}   registered {stats.registered}/{config.instances}   "
            f"silent {stats.silent}   in flight {stats.in_flight}",
        )
        parts = [head]
        left = _left_s(config, stats)
        if left is not None:
            done = min(stats.elapsed_s, config.duration_s)
            bar = Table.grid(padding=(0, 1))
            bar.add_row(ProgressBar(total=config.duration_s, completed=done, width=40),
                        f"{100.0 * done / config.duration_s:3.0f} %   {_clock(done)} of {_clock(config.duration_s)}, "
                        f"left {_clock(left)}")
            parts.append(bar)
        table = Table(box=None, pad_edge=False)
        for column in ("request", "sent", "acknowledged", "errors", f"/s ({RATE_WINDOW_S:.0f} s)", "p50 ms",
                       "p99 ms"):
            table.add_column(column, justify="left" if column == "request" else "right")
        for request in REQUESTS:
            latency = stats.latency[request]
            rate = self.recent_rate(request)
            table.add_row(request, str(stats.sent(request)), str(stats.acknowledged(request)),
                          str(sum(stats.errors(request).values())), "–" if rate is None else f"{rate:.1f}",
                          _ms(latency.quantile_ms(0.5)), _ms(latency.quantile_ms(0.99)))
        rate = self.recent_rate("snapshot")
        target = self.target_rate()
        ratio = "" if rate is None else f" ({100.0 * rate / target:.1f} %)"
        errors = stats.errors()
        foot = Text.assemble(
            f"snapshots: target {target:.1f}/s, acknowledged {'–' if rate is None else f'{rate:.1f}'}/s{ratio}"
            f"   schedule lag p99 {_ms(stats.lag.quantile_ms(0.99))} ms\n",
            ("errors: " + _counts(errors), "red" if errors else ""),
            "\nevents: " + _counts(stats.events),
            *(("\n" + hint, "yellow") for hint in hints(errors, stats.acknowledged(), config.proxy_url)),
        )
        return Group(*parts, table, foot)

    def plain_line(self, stats: FleetStats):
        rate = self.recent_rate("snapshot")
        p99 = stats.all_latency().quantile_ms(0.99)
        left = _left_s(self.config, stats)
        return (f"simulate_fleet t={stats.elapsed_s:.0f}s{'' if left is None else f' left={left:.0f}s'} "
                f"registered={stats.registered} sent={stats.sent()} "
                f"acknowledged={stats.acknowledged()} errors={sum(stats.errors().values())} "
                f"snapshots/s={'–' if rate is None else f'{rate:.1f}'} (target {self.target_rate():.1f}) "
                f"p99={_ms(p99)}ms"
                + "".join(f"; {hint}" for hint in hints(stats.errors(), stats.acknowledged(), self.config.proxy_url)))


def summary_table(summary: dict):
    """The run's summary (``stats.summary``) as a table."""
    table = Table(title="simulate_fleet summary", show_header=True, box=None, pad_edge=False)
    for column in ("request", "sent", "acknowledged", "errors", "p50 ms", "p90 ms", "p99 ms", "max ms"):
        table.add_column(column, justify="left" if column == "request" else "right")
    rows = list(summary["requests"].items()) + [("all", {
        "sent": summary["sent"], "acknowledged": summary["acknowledged"], "errors": summary["errors"],
        "latency_ms": summary["latency_ms"]})]
    for name, row in rows:
        latency = row["latency_ms"]
        table.add_row(name, str(row["sent"]), str(row["acknowledged"]), str(row["errors"]), _ms(latency["p50"]),
                      _ms(latency["p90"]), _ms(latency["p99"]), _ms(latency["max"]))
    rate = summary["rate"]
    achieved = rate["achieved_per_s"]
    lines = Text.assemble(
        f"{summary['instances']} instances every {summary['interval_ms']} ms for {summary['elapsed_s']:.1f} s "
        f"(started over {summary['ramp_s']:g} s), {summary['processes']} process(es) × "
        f"{summary['connections_per_process']} connections, against {summary['proxy_url']}\n",
        f"snapshots: target {rate['target_per_s']:.1f}/s, due {_ms(rate['due_per_s'])}/s, "
        f"sent {_ms(rate['sent_per_s'])}/s, acknowledged {_ms(achieved)}/s"
        + ("" if rate["achieved_ratio"] is None else f" ({100.0 * rate['achieved_ratio']:.1f} % of target")
        + ("" if rate["acknowledged_of_due"] is None else f", {100.0 * rate['acknowledged_of_due']:.1f} % of due")
        + ("" if rate["achieved_ratio"] is None else ")")
        + f"; schedule lag p99 {_ms(summary['schedule_lag_ms']['p99'])} ms\n",
        ("errors: " + (_counts(summary["errors_by_kind"]) if summary["errors"] else "none"),
         "bold red" if summary["errors"] else "green"),
        "\nevents: " + _counts(summary["events"]),
        "" if summary["unregistered_at_end"] else
        f"\nleft registered (--no-unregister): the {summary['instances']} instances stay listed at the Proxy, "
        "stale once its TTL has run out, until its retention deletes them",
    )
    return Group(table, lines)


def routing_table(result: dict):
    """The routing benchmark (``routing_run.run_benchmark``) as a table: one row per policy, and the targets."""
    table = Table(title="routing benchmark", show_header=True, box=None, pad_edge=False)
    prompts = result["workload"].get("prompts") is not None
    columns = ["policy", "requests", "served", "TTFT p50 s", "p90 s", "p99 s", "shed", "route busy", "failed",
               "to failed host >2 s"]
    if prompts:
        columns += ["prefix hits", "output tok/s"]
    for column in columns:
        table.add_column(column, justify="left" if column == "policy" else "right")

    def seconds(value):
        return "–" if value is None else f"{value:.3f}"

    for policy, row in result["routing"].items():
        cells = [policy, str(row["requests"]), str(row["served"]), seconds(row["ttft_p50_s"]),
                 seconds(row["ttft_p90_s"]), seconds(row["ttft_p99_s"]), str(row["shed"]),
                 str(row.get("route_busy", 0)), str(row["failed"]),
                 str(row["sent_to_failed_host_after_2s"])]
        if prompts:
            ratio, rate = row.get("prefix_hit_ratio"), row.get("output_tokens_per_s")
            cells += ["–" if ratio is None else f"{ratio:.1%}", "–" if rate is None else f"{rate:.0f}"]
        table.add_row(*cells)
    workload = result["workload"]
    form = f", prompts sent as {workload['prompt_form']}" if workload.get("prompt_form") else ""
    gpus = ",".join(map(str, workload["gpu_counts"]))
    lines = [f"{workload.get('kind', 'mixed')} workload{form}: {workload['hosts']} hosts (GPUs {gpus}), seed "
             f"{workload['seed']}, {workload['rate_per_s']:.2f} requests/s for {workload['duration_s']:g} s a policy"]
    if result.get("route_url"):
        lines.append(f"placement and feedback asked at {result['route_url']} (the route listener); "
                     "shed: the Proxy's verdict; route busy: its route lane was full (429 route_busy)")
    for policy, row in result["routing"].items():
        busy, failed = row.get("feedback_route_busy", 0), row.get("feedback_failures", 0)
        if busy or failed:
            lines.append(f"{policy}'s feedback: {busy} route busy, {failed} failed")
    for target, met in result["targets"].items():
        lines.append(f"{target}: {'–' if met is None else 'met' if met else 'NOT met'}")
    return Group(table, Text("\n".join(lines)))

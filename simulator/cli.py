"""The simulator's command line: its options, the run they make, the summary it prints.

``manage.py simulate_fleet`` is this over Django's command plumbing; nothing
here imports Django (the simulator is a client of the Proxy like any agent).
"""

import asyncio
import json
import os
from pathlib import Path

from rich.console import Console

from simulator import routing
from simulator.config import RunConfig
from simulator.display import ProgressView, routing_table, summary_table
from simulator.hints import GIVE_UP_AFTER_REFUSALS, hints
from simulator.model import FleetProfile
from simulator.processes import run_fleet
from simulator.prompt_forms import KEYS, PROMPT_FORMS, TEXT_FORMS, TokenizerError, load_tokenizer
from simulator.routing_run import RoutingConfig, WarmUpError, run_benchmark
from simulator.stats import summary
from simulator.workload import MIXED, MODEL, WORKLOADS, RoutingWorkload, verdicts

# The tests' tokenizer (a tiny Llama-like one with a ChatML template), where the repository has it.
DEFAULT_TOKENIZER = Path(__file__).resolve().parents[1] / "tests" / "data" / "engines" / "tiny-llama"

HELP = ("Register N synthetic GPU instances at a Proxy and drive them through its HTTP API "
        "(register, snapshots, heartbeats, unregister); prints a live view and a summary.")


class ConfigError(ValueError):
    """Options that cannot make a run together."""


def failure(result):
    """What the command says when requests failed: their kinds, and what to do where the cause is plain."""
    message = f"{result['errors']} request(s) failed: {result['errors_by_kind']}"
    if result["events"].get("gave_up_refused"):
        message += f" (stopped: its first {GIVE_UP_AFTER_REFUSALS} requests were all refused)"
    return "; ".join([message, *hints(result["errors_by_kind"], result["acknowledged"], result["proxy_url"])])


def output_path(text):
    """A path the command writes or reads: a relative one is the caller's, who ran ``./fw`` from their own
    directory (``./fw`` changes into the repository and exports the caller's as ``FLEETWATCH_CALLER_DIR``)."""
    return Path(os.environ.get("FLEETWATCH_CALLER_DIR", "")) / text


def _bounded(kind, low, below=None):
    """An argparse type: ``kind(text)``, at least ``low`` and, with ``below``, less than it."""

    def parse(text):
        value = kind(text)
        if (value < low) if below is None else not low <= value < below:
            raise ValueError(text)
        return value

    return parse


POSITIVE_INT = _bounded(int, 1)
SHARE = _bounded(float, 0.0, 1.0)
RATE = _bounded(float, 0.0)


def gpu_counts(text):
    counts = tuple(int(part) for part in text.split(","))
    if not counts or any(count < 0 for count in counts):
        raise ValueError(text)
    return counts


def add_arguments(parser):
    """The run's and the fleet's options, on an argparse parser (the command's)."""
    run = parser.add_argument_group("run")
    run.add_argument("--instances", type=POSITIVE_INT, default=10, help="Instances to simulate (default 10).")
    run.add_argument("--interval-ms", type=POSITIVE_INT, default=1000,
                     help="Snapshot report interval of each instance (default 1000).")
    run.add_argument("--proxy-url", default="http://127.0.0.1:8000",
                     help="Base URL of the Proxy (default http://127.0.0.1:8000, where `up` serves).")
    run.add_argument("--token", default=None, help="Bearer token (scope instance) sent with every request.")
    run.add_argument("--duration", type=float, default=None, metavar="S",
                     help="Report for S seconds, then unregister and stop (default: until Ctrl-C).")
    run.add_argument("--rounds", type=POSITIVE_INT, default=None,
                     help="Stop after this many report slots per instance.")
    run.add_argument("--ramp-s", type=float, default=None, metavar="S",
                     help="Start the fleet over S seconds: an even share registers each interval "
                          "(default: 200 registrations a second; 0 starts every instance in the first interval).")
    run.add_argument("--processes", type=POSITIVE_INT, default=1,
                     help="Split the fleet over this many processes (default 1).")
    run.add_argument("--connections", type=POSITIVE_INT, default=64,
                     help="Keep-alive connections per process, at most (default 64).")
    run.add_argument("--timeout-s", type=float, default=10.0, help="Timeout of each request (default 10).")
    run.add_argument("--no-unregister", action="store_true", help="Leave the instances registered at the end.")
    run.add_argument("--id-prefix", default="sim", help="Instance ids are PREFIX-00000, … (default sim).")
    run.add_argument("--json", default=None, metavar="PATH", help="Also write the summary as JSON to PATH.")
    run.add_argument("--no-progress", action="store_true", help="No live view (the summary is still printed).")

    fleet = parser.add_argument_group("fleet")
    defaults = FleetProfile()
    fleet.add_argument("--seed", type=int, default=0, help="Seed of every random choice (default 0).")
    fleet.add_argument("--gpus", type=gpu_counts, default=defaults.gpu_counts, metavar="N,N,…",
                       help="GPU counts of the host sizes, picked evenly (default 1,2,4,8).")
    fleet.add_argument("--unhealthy-gpus", type=SHARE, default=defaults.unhealthy_gpu_share, metavar="SHARE",
                       help=f"Share of GPUs unhealthy at any moment (default {defaults.unhealthy_gpu_share}).")
    fleet.add_argument("--stale-per-hour", type=RATE, default=defaults.stale_per_hour, metavar="RATE",
                       help=f"Stale spells per host-hour (default {defaults.stale_per_hour}).")
    fleet.add_argument("--restarts-per-hour", type=RATE, default=defaults.restarts_per_hour, metavar="RATE",
                       help=f"Agent restarts per host-hour (default {defaults.restarts_per_hour}).")
    fleet.add_argument("--capabilities", type=SHARE, default=defaults.capabilities_share, metavar="SHARE",
                       help=f"Share of instances with typed capabilities (default {defaults.capabilities_share}).")
    fleet.add_argument("--no-engines", action="store_true",
                       help="No serving engines: snapshots without SPEC 13's engines list.")
    fleet.add_argument("--engine-faults", type=SHARE, default=defaults.engine_fault_share, metavar="SHARE",
                       help="Share of engines failing to answer at any moment "
                            f"(default {defaults.engine_fault_share}).")
    fleet.add_argument("--engine-bursts-per-hour", type=RATE, default=defaults.engine_bursts_per_hour,
                       metavar="RATE",
                       help=f"Request bursts per engine-hour (default {defaults.engine_bursts_per_hour}).")
    fleet.add_argument("--calm", action="store_true",
                       help="No stale spells and no restarts: every slot reports (for exact counts).")

    bench = parser.add_argument_group("routing benchmark (docs/simulator.md)")
    workload = RoutingWorkload()
    bench.add_argument("--routing-benchmark", action="store_true",
                       help="Route the seeded request workload by every policy in turn; print and write the table.")
    bench.add_argument("--workload", choices=WORKLOADS, default=MIXED,
                       help="The request workload: mixed (issue 19's: lengths, faults), shared-prefix (tenants' "
                            "system prompts and multi-turn sessions, engines with a prefix cache) or no-prefix "
                            "(the same lengths, every prompt its own). Default mixed.")
    bench.add_argument("--route", choices=routing.POLICIES, default=None,
                       help="Route the workload by this policy only.")
    bench.add_argument("--prompt-form", choices=PROMPT_FORMS, default=KEYS,
                       help="How the placement policies send a prompt workload's prompt: keys (prompt_block_keys "
                            "the client computes), ids (prompt_token_ids), text (a completion's prompt) or chat "
                            "(messages); the Proxy tokenizes text and chat with FLEETWATCH_TOKENIZERS' tokenizer "
                            "for the workload's model. Default keys.")
    bench.add_argument("--tokenizer", default=None, metavar="DIR",
                       help="The tokenizer directory of --prompt-form text or chat: the one the Proxy has for "
                            "the model (default: tests/data/engines/tiny-llama of this repository).")
    bench.add_argument("--route-url", default=None, metavar="URL",
                       help="The Proxy's route listener, where the placement questions and the feedback go "
                            "(default: --proxy-url's port + 1, where `up` puts it; docs/placement.md).")
    bench.add_argument("--route-token", default=None,
                       help="Bearer token (scope route or read) of the placement questions, the feedback and "
                            "the list reads (default: --token).")
    bench.add_argument("--routing-duration", type=_bounded(float, 1.0), default=workload.duration_s, metavar="S",
                       help=f"Seconds of routed traffic per policy (default {workload.duration_s:g}).")
    bench.add_argument("--routing-hosts", type=_bounded(int, 4), default=workload.hosts,
                       help=f"Hosts of the workload's fleet (default {workload.hosts}).")
    bench.add_argument("--routing-load", type=_bounded(float, 0.01), default=workload.load, metavar="SHARE",
                       help=f"Offered load, of the healthy hosts' service rate (default {workload.load:g}).")


def run_config(options):
    """The ``RunConfig`` of parsed options; ``ConfigError`` for a combination the parser cannot refuse."""
    if options["processes"] > options["instances"]:
        raise ConfigError("--processes cannot exceed --instances")
    if options["timeout_s"] <= 0 or (options["duration"] is not None and options["duration"] <= 0):
        raise ConfigError("--timeout-s and --duration must be positive")
    if options["ramp_s"] is not None and options["ramp_s"] < 0:
        raise ConfigError("--ramp-s cannot be negative")
    profile = FleetProfile(
        gpu_counts=options["gpus"],
        unhealthy_gpu_share=options["unhealthy_gpus"],
        stale_per_hour=0.0 if options["calm"] else options["stale_per_hour"],
        restarts_per_hour=0.0 if options["calm"] else options["restarts_per_hour"],
        capabilities_share=options["capabilities"],
        engines=not options["no_engines"],
        engine_fault_share=options["engine_faults"],
        engine_bursts_per_hour=options["engine_bursts_per_hour"],
    )
    return RunConfig(
        proxy_url=options["proxy_url"],
        instances=options["instances"],
        interval_ms=options["interval_ms"],
        token=options["token"],
        duration_s=options["duration"],
        rounds=options["rounds"],
        seed=options["seed"],
        id_prefix=options["id_prefix"],
        profile=profile,
        processes=options["processes"],
        connections=options["connections"],
        timeout_s=options["timeout_s"],
        unregister=not options["no_unregister"],
        ramp_s=options["ramp_s"],
    )


def run(options, out):
    """Run the fleet of ``options`` to its end, printing a live view and the summary on ``out`` (a terminal
    or not); returns the summary."""
    config = run_config(options)
    view = ProgressView(config, enabled=not options["no_progress"])
    with view:
        stats = run_fleet(config, on_progress=view.update)
    return _report(summary(stats, config), summary_table, options, out)


def _report(result, table, options, out):
    """Prints ``table(result)`` on ``out`` (a terminal or not), writes the result to ``--json`` if asked; returns it."""
    console = Console(force_terminal=out.isatty(), width=120)
    with console.capture() as capture:
        console.print(table(result))
    out.write(capture.get())
    if options["json"]:
        output_path(options["json"]).write_text(json.dumps(result, indent=2) + "\n")
    return result


def routing_config(options):
    """The ``RoutingConfig`` of parsed options (``--routing-benchmark`` or ``--route``)."""
    kind = options.get("workload") or MIXED
    workload = RoutingWorkload.of(kind, seed=options["seed"], hosts=options["routing_hosts"],
                                  gpu_counts=options["gpus"], duration_s=options["routing_duration"],
                                  load=options["routing_load"])
    if 0 in workload.gpu_counts:
        raise ConfigError("--gpus cannot include 0 for the routing benchmark: every host runs an engine")
    form = options.get("prompt_form") or KEYS
    if form != KEYS and workload.prompts is None:
        raise ConfigError(f"--prompt-form {form} needs a prompt workload (--workload shared-prefix or no-prefix)")
    tokenizer = None
    if form in TEXT_FORMS:
        if options.get("tokenizer"):
            tokenizer = str(output_path(options["tokenizer"]))
        elif DEFAULT_TOKENIZER.is_dir():
            tokenizer = str(DEFAULT_TOKENIZER)
        else:
            raise ConfigError(f"--prompt-form {form} needs --tokenizer DIR: the tokenizer the Proxy has for {MODEL}")
        try:
            load_tokenizer(tokenizer)
        except TokenizerError as error:
            raise ConfigError(str(error)) from None
    return RoutingConfig(
        proxy_url=options["proxy_url"], route_url=options.get("route_url"), token=options["token"],
        route_token=options["route_token"] or options["token"], workload=workload,
        policies=(options["route"],) if options["route"] else routing.policies_for(kind),
        interval_ms=options["interval_ms"], id_prefix=options["id_prefix"], timeout_s=options["timeout_s"],
        prompt_form=form, tokenizer=tokenizer)


def run_routing(options, out):
    """Run the routing benchmark of ``options``, print its table on ``out``; returns the result."""
    config = routing_config(options)

    def finished(policy, row):
        if not options["no_progress"]:
            out.write(f"{policy}: {row['requests']} requests, TTFT p90 {row['ttft_p90_s']} s\n")

    try:
        result = asyncio.run(run_benchmark(config, on_policy=finished))
    except (WarmUpError, TokenizerError) as error:
        raise ConfigError(str(error)) from None
    result["targets"] = verdicts(result["routing"], config.workload.kind)
    return _report(result, routing_table, options, out)


def routing_failure(result):
    """What the command says when the Proxy failed the router's own questions; None when it did not."""
    broken = {policy: row["failed_by_kind"]["route_error"] for policy, row in result["routing"].items()
              if row["failed_by_kind"]["route_error"]}
    if not broken:
        return None
    return (f"the Proxy answered the router's questions with errors ({broken}): does it serve "
            "POST /v1/placement (SPEC 14.1), and does --route-token have scope route or read?")

"""Agent settings from command-line flags and ``FLEETWATCH_AGENT_*`` variables.

Every flag ``--some-name`` has the variable ``FLEETWATCH_AGENT_SOME_NAME``;
a flag given on the command line wins over the variable, the variable over
the default. The agent uses its own prefix because it is often started from
an environment that also configures the control plane (``manage.py up``), and
names such as ``FLEETWATCH_ADVERTISE_HOST`` mean something else there.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field, fields, replace
from urllib.parse import urlsplit

from agent import AGENT_VERSION
from agent.capacity import AdmissionThresholds
from agent.prefix_keys import DEFAULT_BLOCK_TOKENS

ENV_PREFIX = "FLEETWATCH_AGENT_"
DEFAULT_PROXY_URL = "http://127.0.0.1:8000"
TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off"}
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
DEFAULT_THRESHOLDS = AdmissionThresholds()


# --- value parsers (shared by flags and variables) ---------------------------

def parse_bool(text: str) -> bool:
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not a boolean (true/false/1/0/yes/no/on/off)")


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[IPV6]:PORT``; port 0 asks the OS for a free port."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, _port(port, allow_zero=True)


def parse_url(text: str) -> str:
    url = text.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http(s) URL")
    try:
        port = parts.port  # urlsplit checks the port only when it is asked for it
    except ValueError:
        port = 0
    if port == 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the port is not a number from 1 to 65535")
    return url


def parse_text(text: str) -> str:
    value = text.strip()
    if not value:
        raise argparse.ArgumentTypeError("must not be empty")
    return value


def parse_port(text: str) -> int:
    return _port(text, allow_zero=False)


def _port(text: str, allow_zero: bool) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not (0 if allow_zero else 1) <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is out of range")
    return port


def _number(kind, low, high=None):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {kind.__name__}") from None
        if value < low or (high is not None and value > high):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"{value} must be {bound}")
        return value

    return parse


def parse_log_level(text: str) -> str:
    level = text.strip().upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(LOG_LEVELS)}")
    return level


def parse_zmq_endpoint(text: str) -> str:
    # Imported here: the wire module is small, but config is imported by every launcher.
    from agent.engines.kv_events import parse_endpoint

    try:
        return parse_endpoint(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def parse_mount_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


@dataclass(frozen=True)
class Option:
    flag: str
    dest: str
    parse: object
    help: str
    metavar: str | None = None
    kind: str = "value"  # "value", "bool" (--x/--no-x), "list" (repeatable)
    env: str | None = None  # a variable named otherwise than after the flag (SPEC 13's ..._ENGINE_URLS)

    @property
    def env_name(self) -> str:
        return self.env or ENV_PREFIX + self.flag.lstrip("-").replace("-", "_").upper()


def setting(default, flag, parse, help, metavar=None, kind="value", env=None, dest=None):
    """A field of ``Settings`` and the flag that sets it (its ``Option``; ``dest`` defaults to the field's name)."""
    return field(default=default, metadata={"option": Option(flag, dest, parse, help, metavar, kind, env)})


@dataclass(frozen=True)
class Settings:
    """Everything the agent can be told, each with its flag. Defaults run a useful agent as is."""

    listen_host: str = setting("127.0.0.1", "--listen", parse_listen, "address of the agent's HTTP endpoints "
                               "(default 127.0.0.1:9201; port 0 picks a free port)", "HOST:PORT", dest="listen")
    listen_port: int = 9201  # set by --listen too
    proxy_url: str = setting(DEFAULT_PROXY_URL, "--proxy-url", parse_url,
                             f"base URL of the Proxy (default {DEFAULT_PROXY_URL})", "URL")
    # None: "hp_{advertise_host}:{advertise_port}", the Proxy's own rule for
    # an instance registered without an id.
    instance_id: str | None = setting(None, "--instance-id", parse_text, "instance id to register and report as "
                                      "(default hp_{advertise host}:{advertise port})", "ID")
    token: str | None = setting(None, "--token", parse_text,
                                "bearer token sent to the Proxy (prefer the variable: flags show in ps)", "TOKEN")
    sample_interval_ms: int = setting(1000, "--sample-interval-ms", _number(int, 10), "sampling period (default 1000)",
                                      "N")
    report_interval_ms: int = setting(1000, "--report-interval-ms", _number(int, 10),
                                      "snapshot report period (default 1000)", "N")
    register: bool = setting(True, "--register", parse_bool, "register with the Proxy at start and after it forgets "
                             "us (default on)", kind="bool")
    report: bool = setting(True, "--report", parse_bool, "talk to the Proxy at all; --no-report only serves the HTTP "
                           "endpoints (default on)", kind="bool")
    once: bool = False  # --once, a flag of its own (build_parser)
    disk_mounts: tuple[str, ...] = setting(("/",), "--disk-mount", parse_text, "filesystem to report; repeatable "
                                           "(default /); the variable takes a comma-separated list", "PATH",
                                           kind="list")
    model_dir: str | None = setting(None, "--model-dir", parse_text,
                                    "model directory; its filesystem is reported too", "PATH")
    # Where the Proxy should find this instance; None: the listen address
    # (or this host's name when listening on every interface).
    advertise_host: str | None = setting(None, "--advertise-host", parse_text, "host sent to the Proxy at register",
                                         "HOST")
    advertise_port: int | None = setting(None, "--advertise-port", parse_port, "port sent to the Proxy at register",
                                         "PORT")
    gpu_window_ms: int = setting(5000, "--gpu-window-ms", _number(int, 100),
                                 "GPU utilisation averaging window (default 5000)", "N")
    gpu_temp_degraded_c: float = setting(85.0, "--gpu-temp-degraded-c", _number(float, 0.0),
                                         "GPU temperature from which its health is degraded (default 85)", "C")
    min_memory_free_ratio: float = setting(
        DEFAULT_THRESHOLDS.min_memory_free_ratio, "--min-memory-free-ratio", _number(float, 0.0, 1.0),
        "reject admission below this available-memory ratio (default 0.05)", "R")
    max_cpu_pct: float = setting(DEFAULT_THRESHOLDS.max_cpu_pct, "--max-cpu-pct", _number(float, 0.0, 100.0),
                                 "degrade admission above this CPU utilisation (default 95)", "PCT")
    max_gpu_memory_ratio: float = setting(
        DEFAULT_THRESHOLDS.max_gpu_memory_ratio, "--max-gpu-memory-ratio", _number(float, 0.0, 1.0),
        "degrade admission when any GPU's used/total memory is above this (default 0.97)", "R")
    http_timeout_s: float = setting(5.0, "--http-timeout-s", _number(float, 0.1),
                                    "timeout of each Proxy request (default 5)", "S")
    max_connections: int = setting(16, "--max-connections", _number(int, 1, 1024),
                                   "concurrent HTTP connections served; more are answered 503 (default 16)", "N")
    log_level: str = setting("INFO", "--log-level", parse_log_level, "DEBUG, INFO, WARNING or ERROR (default INFO)",
                             "LEVEL")
    # Serving engines whose /metrics are read on every sample tick (SPEC 13).
    engine_urls: tuple[str, ...] = setting(
        (), "--engine-url", parse_url, "base URL of a serving engine (vLLM, SGLang) whose /metrics is read on every "
        f"sample tick; repeatable; {ENV_PREFIX}ENGINE_URLS takes a comma-separated list", "URL", kind="list",
        env=ENV_PREFIX + "ENGINE_URLS")
    # None: on every sample tick (SPEC 13). A rate of their own keeps the engines' figures fresh without
    # sampling the whole host as often (issue 32: the host sample is most of the agent's cost).
    engine_interval_ms: int | None = setting(
        None, "--engine-interval-ms", _number(int, 50, 3_600_000), "scrape the engines at this period of their "
        "own, refreshing the snapshot's engines between host samples (default: on every sample tick)", "N")
    engine_timeout_ms: int = setting(500, "--engine-timeout-ms", _number(int, 10, 60_000),
                                     "time limit of one engine scrape (default 500)", "N")
    # What each engine serves (SPEC 16.1): its /v1/models, read at start and then at this period.
    engine_models_interval_s: float = setting(
        30.0, "--engine-models-interval-s", _number(float, 1.0, 86_400.0), "read each engine's /v1/models (what "
        "it serves: models and LoRA adapters) at start and then at this period (default 30)", "S")
    engine_window_ms: int = setting(10_000, "--engine-window-ms", _number(int, 1000, 3_600_000),
                                    "window of the engines' rates, ratios and latency quantiles (default 10000)", "N")
    max_engine_kv_usage_ratio: float = setting(
        DEFAULT_THRESHOLDS.max_engine_kv_usage_ratio, "--max-engine-kv-usage-ratio", _number(float, 0.0, 1.0),
        "degrade admission when an engine's KV cache usage is at least this (default 0.95)", "R")
    max_engine_requests_waiting: int = setting(
        DEFAULT_THRESHOLDS.max_engine_requests_waiting, "--max-engine-requests-waiting", _number(int, 1),
        "degrade admission when an engine has at least this many requests waiting (default 32)", "N")
    # GPU hardware events (SPEC 13): how long a critical XID keeps a GPU in
    # error, and from how long an NVML call is taken to be hung.
    gpu_xid_window_s: float = setting(300.0, "--gpu-xid-window-s", _number(float, 1.0),
                                      "how long a critical XID error keeps its GPU's health at error (default 300)",
                                      "S")
    nvml_slow_ms: int = setting(2000, "--nvml-slow-ms", _number(int, 100, 600_000),
                                "an NVML call taking longer makes its GPU's health degraded (nvml_slow) "
                                "(default 2000)", "N")

    # The engines' KV-cache events (SPEC 15.2): ZMQ publishers paired in order with --engine-url.
    engine_kv_events: tuple[str, ...] = setting(
        (), "--engine-kv-events", parse_zmq_endpoint, "ZMQ endpoint of the KV-cache event publisher of the "
        "--engine-url in the same position (vLLM's --kv-events-config endpoint; tcp://*:PORT means this host); "
        "repeatable; needs the agent's kv-events extra", "ENDPOINT", kind="list")
    engine_kv_replay: tuple[str, ...] = setting(
        (), "--engine-kv-replay", parse_zmq_endpoint, "the replay (ROUTER) endpoint of the event publisher in the "
        "same position (vLLM's replay_endpoint), asked for the batches of a sequence gap; repeatable", "ENDPOINT",
        kind="list")
    # SPEC 15.2 sends changes "at most every 250 ms": 250 is the floor, a longer period is allowed. One body a
    # second costs the agent a quarter of four (issue 32); the first change after a quiet period still goes
    # within 250 ms (agent/prefix_reporter.py), and the Proxy's "visible within 1 s" (15.4) counts from its answer.
    prefix_interval_ms: int = setting(
        1000, "--prefix-interval-ms", _number(int, 250, 60_000), "least time between two bodies of an engine's "
        "KV-cache changes to the Proxy while changes keep coming, and between two reads of its event queue "
        "(SPEC 15.2: at least 250; default 1000)", "N")
    # The pool's block size (SPEC 15.1): one value per pool, so the variable is the pool's, not the agent's.
    prefix_block_tokens: int = setting(
        DEFAULT_BLOCK_TOKENS, "--prefix-block-tokens", _number(int, 1, 4096), "tokens per prompt block key, the "
        f"pool's FLEETWATCH_PREFIX_BLOCK_TOKENS (default {DEFAULT_BLOCK_TOKENS})", "N",
        env="FLEETWATCH_PREFIX_BLOCK_TOKENS")

    @property
    def monitored_mounts(self) -> tuple[str, ...]:
        """Disk entries of the snapshot: the configured mounts, then the model directory."""
        mounts = list(self.disk_mounts)
        if self.model_dir and self.model_dir not in mounts:
            mounts.append(self.model_dir)
        return tuple(mounts)

    @property
    def thresholds(self) -> AdmissionThresholds:
        """The admission thresholds: the settings named as ``AdmissionThresholds``' fields (and defaulting to them)."""
        return AdmissionThresholds(**{f.name: getattr(self, f.name) for f in fields(AdmissionThresholds)})

# The flags in Settings' order: each field's own, named after it unless it says otherwise.
OPTIONS = tuple(replace(f.metadata["option"], dest=f.metadata["option"].dest or f.name)
                for f in fields(Settings) if "option" in f.metadata)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fleetwatch-agent",
        description="Fleetwatch host agent: samples this host (CPU, memory, network, disk, NVIDIA GPUs) and "
                    "reports it to a Fleetwatch Proxy. Every flag --x-y can also be set with the environment "
                    f"variable {ENV_PREFIX}X_Y; flags win.",
    )
    for option in OPTIONS:
        if option.kind == "bool":
            parser.add_argument(option.flag, dest=option.dest, action=argparse.BooleanOptionalAction,
                                default=None, help=option.help)
        elif option.kind == "list":
            parser.add_argument(option.flag, dest=option.dest, type=option.parse, action="append",
                                default=None, metavar=option.metavar, help=option.help)
        else:
            parser.add_argument(option.flag, dest=option.dest, type=option.parse, default=None,
                                metavar=option.metavar, help=option.help)
    parser.add_argument("--once", action="store_true",
                        help="print one snapshot as JSON and exit; also reports it unless --no-report "
                             "(exit status 1 when that report fails)")
    parser.add_argument("--version", action="version", version=f"fleetwatch-agent {AGENT_VERSION}")
    return parser


def load_settings(argv=None, environ=None) -> Settings:
    """Settings from ``argv`` (default ``sys.argv[1:]``) and ``environ`` (default ``os.environ``).

    Invalid values, from a flag or a variable, exit with status 2 and a
    message naming the culprit, as argparse does.
    """
    environ = os.environ if environ is None else environ
    parser = build_parser()
    args = parser.parse_args(argv)
    values = {}
    for option in OPTIONS:
        value = getattr(args, option.dest)
        if value is None:
            value = _from_env(parser, option, environ)
        if value is None:
            continue
        if option.dest == "listen":
            values["listen_host"], values["listen_port"] = value
        elif option.kind == "list":
            values[option.dest] = tuple(value)
        else:
            values[option.dest] = value
    values["once"] = args.once
    known = {f.name for f in fields(Settings)}
    settings = Settings(**{k: v for k, v in values.items() if k in known})
    for name in ("engine_kv_events", "engine_kv_replay"):
        if len(getattr(settings, name)) > len(settings.engine_urls):
            parser.error(f"--{name.replace('_', '-')} is paired in order with --engine-url: "
                         f"{len(getattr(settings, name))} given for {len(settings.engine_urls)} engine URL(s)")
    return settings


def _from_env(parser, option: Option, environ):
    raw = environ.get(option.env_name)
    if raw is None or not raw.strip():
        return None
    try:
        if option.kind == "list":
            return tuple(option.parse(part) for part in parse_mount_list(raw))
        return option.parse(raw)
    except argparse.ArgumentTypeError as error:
        parser.error(f"{option.env_name}: {error}")

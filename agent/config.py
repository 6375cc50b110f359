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
from dataclasses import dataclass, fields
from urllib.parse import urlsplit

from agent import AGENT_VERSION
from agent.capacity import AdmissionThresholds

ENV_PREFIX = "FLEETWATCH_AGENT_"
DEFAULT_PROXY_URL = "http://127.0.0.1:8000"
TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off"}
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


@dataclass(frozen=True)
class Settings:
    """Everything the agent can be told. Defaults run a useful agent as is."""

    listen_host: str = "127.0.0.1"
    listen_port: int = 9201
    proxy_url: str = DEFAULT_PROXY_URL
    # None: "hp_{advertise_host}:{advertise_port}", the Proxy's own rule for
    # an instance registered without an id.
    instance_id: str | None = None
    token: str | None = None
    sample_interval_ms: int = 1000
    report_interval_ms: int = 1000
    register: bool = True
    report: bool = True
    once: bool = False
    disk_mounts: tuple[str, ...] = ("/",)
    model_dir: str | None = None
    # Where the Proxy should find this instance; None: the listen address
    # (or this host's name when listening on every interface).
    advertise_host: str | None = None
    advertise_port: int | None = None
    gpu_window_ms: int = 5000
    gpu_temp_degraded_c: float = 85.0
    min_memory_free_ratio: float = 0.05
    max_cpu_pct: float = 95.0
    max_gpu_memory_ratio: float = 0.97
    http_timeout_s: float = 5.0
    max_connections: int = 16
    log_level: str = "INFO"
    # Serving engines whose /metrics are read on every sample tick (SPEC 13).
    engine_urls: tuple[str, ...] = ()
    engine_timeout_ms: int = 500
    engine_window_ms: int = 10_000
    max_engine_kv_usage_ratio: float = 0.95
    max_engine_requests_waiting: int = 32
    # GPU hardware events (SPEC 13): how long a critical XID keeps a GPU in
    # error, and from how long an NVML call is taken to be hung.
    gpu_xid_window_s: float = 300.0
    nvml_slow_ms: int = 2000

    @property
    def monitored_mounts(self) -> tuple[str, ...]:
        """Disk entries of the snapshot: the configured mounts, then the model directory."""
        mounts = list(self.disk_mounts)
        if self.model_dir and self.model_dir not in mounts:
            mounts.append(self.model_dir)
        return tuple(mounts)

    @property
    def thresholds(self) -> AdmissionThresholds:
        return AdmissionThresholds(
            min_memory_free_ratio=self.min_memory_free_ratio,
            max_cpu_pct=self.max_cpu_pct,
            max_gpu_memory_ratio=self.max_gpu_memory_ratio,
            max_engine_kv_usage_ratio=self.max_engine_kv_usage_ratio,
            max_engine_requests_waiting=self.max_engine_requests_waiting,
        )


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


OPTIONS = (
    Option("--listen", "listen", parse_listen, "address of the agent's HTTP endpoints (default 127.0.0.1:9201; "
           "port 0 picks a free port)", "HOST:PORT"),
    Option("--proxy-url", "proxy_url", parse_url, f"base URL of the Proxy (default {DEFAULT_PROXY_URL})", "URL"),
    Option("--instance-id", "instance_id", parse_text, "instance id to register and report as "
           "(default hp_{advertise host}:{advertise port})", "ID"),
    Option("--token", "token", parse_text, "bearer token sent to the Proxy (prefer the variable: flags show in ps)",
           "TOKEN"),
    Option("--sample-interval-ms", "sample_interval_ms", _number(int, 10), "sampling period (default 1000)", "N"),
    Option("--report-interval-ms", "report_interval_ms", _number(int, 10), "snapshot report period (default 1000)",
           "N"),
    Option("--register", "register", parse_bool, "register with the Proxy at start and after it forgets us "
           "(default on)", kind="bool"),
    Option("--report", "report", parse_bool, "talk to the Proxy at all; --no-report only serves the HTTP endpoints "
           "(default on)", kind="bool"),
    Option("--disk-mount", "disk_mounts", parse_text, "filesystem to report; repeatable (default /); the variable "
           "takes a comma-separated list", "PATH", kind="list"),
    Option("--model-dir", "model_dir", parse_text, "model directory; its filesystem is reported too", "PATH"),
    Option("--advertise-host", "advertise_host", parse_text, "host sent to the Proxy at register", "HOST"),
    Option("--advertise-port", "advertise_port", parse_port, "port sent to the Proxy at register", "PORT"),
    Option("--gpu-window-ms", "gpu_window_ms", _number(int, 100), "GPU utilisation averaging window (default 5000)",
           "N"),
    Option("--gpu-temp-degraded-c", "gpu_temp_degraded_c", _number(float, 0.0),
           "GPU temperature from which its health is degraded (default 85)", "C"),
    Option("--min-memory-free-ratio", "min_memory_free_ratio", _number(float, 0.0, 1.0),
           "reject admission below this available-memory ratio (default 0.05)", "R"),
    Option("--max-cpu-pct", "max_cpu_pct", _number(float, 0.0, 100.0),
           "degrade admission above this CPU utilisation (default 95)", "PCT"),
    Option("--max-gpu-memory-ratio", "max_gpu_memory_ratio", _number(float, 0.0, 1.0),
           "degrade admission when any GPU's used/total memory is above this (default 0.97)", "R"),
    Option("--http-timeout-s", "http_timeout_s", _number(float, 0.1), "timeout of each Proxy request (default 5)",
           "S"),
    Option("--max-connections", "max_connections", _number(int, 1, 1024),
           "concurrent HTTP connections served; more are answered 503 (default 16)", "N"),
    Option("--log-level", "log_level", parse_log_level, "DEBUG, INFO, WARNING or ERROR (default INFO)", "LEVEL"),
    Option("--engine-url", "engine_urls", parse_url, "base URL of a serving engine (vLLM, SGLang) whose /metrics is "
           f"read on every sample tick; repeatable; {ENV_PREFIX}ENGINE_URLS takes a comma-separated list", "URL",
           kind="list", env=ENV_PREFIX + "ENGINE_URLS"),
    Option("--engine-timeout-ms", "engine_timeout_ms", _number(int, 10, 60_000),
           "time limit of one engine scrape (default 500)", "N"),
    Option("--engine-window-ms", "engine_window_ms", _number(int, 1000, 3_600_000),
           "window of the engines' rates, ratios and latency quantiles (default 10000)", "N"),
    Option("--max-engine-kv-usage-ratio", "max_engine_kv_usage_ratio", _number(float, 0.0, 1.0),
           "degrade admission when an engine's KV cache usage is at least this (default 0.95)", "R"),
    Option("--max-engine-requests-waiting", "max_engine_requests_waiting", _number(int, 1),
           "degrade admission when an engine has at least this many requests waiting (default 32)", "N"),
    Option("--gpu-xid-window-s", "gpu_xid_window_s", _number(float, 1.0),
           "how long a critical XID error keeps its GPU's health at error (default 300)", "S"),
    Option("--nvml-slow-ms", "nvml_slow_ms", _number(int, 100, 600_000),
           "an NVML call taking longer makes its GPU's health degraded (nvml_slow) (default 2000)", "N"),
)


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
    return Settings(**{k: v for k, v in values.items() if k in known})


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

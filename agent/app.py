"""Wiring: the agent's parts built from ``Settings``, started and stopped in order.

Start: open NVML (on the GPU thread) and scrape the engines once, bind the
HTTP port (so a port clash fails fast), take the first sample, then serve,
sample on a thread and report on another.
Stop: stop reporting, unregister (best effort), stop sampling and serving,
stop the engine scrapers, close NVML.
"""

from __future__ import annotations

import gc
import json
import logging
import signal
import socket
import sys
import threading
import time
from urllib.parse import urlsplit

from agent import AGENT_VERSION
from agent.config import Settings
from agent.engines.scraper import EngineScrapers
from agent.gpu.monitor import GpuMonitor
from agent.gpu.watch import GpuSampler
from agent.sampler import HostSampler, monotonic_ms
from agent.server import AgentServer
from agent.snapshot import SamplingLoop, SnapshotBuilder, SnapshotStore

log = logging.getLogger("agent")

ANY_ADDRESS = {"", "0.0.0.0", "::"}


def listener_address(settings: Settings, bound_port: int):
    """Where this agent's own HTTP listener is reached: the advertised host, else its listen host."""
    host = settings.advertise_host or settings.listen_host
    if host in ANY_ADDRESS:
        host = socket.gethostname()
    return host, bound_port


def advertise_address(settings: Settings, bound_port: int):
    """Host and port sent at register: the placement destination (SPEC 16.1).

    With engines, where the first engine serves (its URL's host and port):
    a gateway following a placement sends the client's request there, not to
    the agent. ``--advertise-host`` and ``--advertise-port`` override each
    part. Without engines, where the agent listens, as before.
    """
    if settings.engine_urls:
        parts = urlsplit(settings.engine_urls[0])
        engine_host = parts.hostname
        if engine_host in ANY_ADDRESS:
            engine_host = socket.gethostname()
        engine_port = parts.port or (443 if parts.scheme == "https" else 80)
        return settings.advertise_host or engine_host, settings.advertise_port or engine_port
    host, port = listener_address(settings, bound_port)
    return host, settings.advertise_port or port


def default_instance_id(host, port):
    """The Proxy's own id for an instance registered without one (SPEC 3)."""
    return f"hp_{host}:{port}"


class Agent:
    """One running agent. ``nvml`` and ``source`` are injectable for tests."""

    def __init__(self, settings: Settings, nvml=None, source=None, clock_ms=monotonic_ms):
        self.settings = settings
        self.gpus = GpuMonitor(nvml, settings.gpu_window_ms, settings.gpu_temp_degraded_c, clock_ms,
                               slow_ms=settings.nvml_slow_ms, xid_window_ms=int(settings.gpu_xid_window_s * 1000))
        self.gpu_sampler = GpuSampler(self.gpus, settings.nvml_slow_ms)
        self.host_sampler = HostSampler(source, clock_ms, settings.monitored_mounts)
        self.engines = None
        if settings.engine_urls:
            self.engines = EngineScrapers(settings.engine_urls, settings.engine_timeout_ms, settings.engine_window_ms,
                                          clock_ms, models_interval_ms=int(settings.engine_models_interval_s * 1000))
            self.engines.subscribers = self._kv_subscribers(clock_ms)
        self.store = SnapshotStore()
        self.builder = SnapshotBuilder(self.host_sampler, self.gpu_sampler, settings.instance_id, socket.gethostname(),
                                       settings.thresholds, engines=self.engines)
        self.loop = SamplingLoop(self.builder, self.store, settings.sample_interval_ms, clock_ms,
                                 engine_interval_ms=settings.engine_interval_ms)
        self.server = None
        self.reporter = None
        self.prefix_reporter = None
        self.tokenizer_offerer = None

    def _kv_subscribers(self, clock_ms):
        """One KV-event subscriber per --engine-kv-events, paired in order with the engine URLs (SPEC 15.2)."""
        from agent.engines.kv_subscriber import KvSubscriber

        settings = self.settings
        replays = list(settings.engine_kv_replay) + [None] * len(settings.engine_urls)
        subscribers = []
        for n, scraper in enumerate(self.engines.scrapers):
            endpoint = settings.engine_kv_events[n] if n < len(settings.engine_kv_events) else None
            subscribers.append(None if endpoint is None else KvSubscriber(
                endpoint, settings.prefix_block_tokens, scraper.model_of, replays[n], clock_ms,
                name=f"fleetwatch-kv-{n}", hold_ms=settings.prefix_interval_ms))
        return subscribers

    def prefix_sources(self):
        """``(engine name, resident set)`` of every rank of every subscriber: the URL, ``#dpN`` for rank N > 0."""
        if self.engines is None:
            return []
        out = []
        for scraper, subscriber in zip(self.engines.scrapers, self.engines.subscribers):
            if subscriber is not None:
                for rank, state in sorted(subscriber.ranks().items()):
                    out.append((scraper.url if rank == 0 else f"{scraper.url}#dp{rank}", state.blocks))
        return out

    def _identify(self, bound_port):
        host, port = advertise_address(self.settings, bound_port)
        if not self.builder.instance_id:
            self.builder.instance_id = default_instance_id(host, port)
        return host, port

    def _set_instance_id(self, instance_id):
        self.builder.instance_id = instance_id

    def _make_reporter(self, host, port):
        from agent.proxy_client import ProxyClient
        from agent.reporter import Reporter

        settings = self.settings
        client = ProxyClient(settings.proxy_url, settings.token, settings.http_timeout_s)
        agent_host, agent_port = listener_address(settings, self.server.port if self.server else settings.listen_port)
        return Reporter(
            client, self.store, instance_id=self.builder.instance_id, host=host, port=port,
            meta={
                "agent_version": AGENT_VERSION,
                "hostname": self.builder.hostname,
                "gpu_names": self.gpus.names,
                "gpu_status": self.gpus.status,
                "agent_url": f"http://{_url_host(agent_host)}:{agent_port}",  # the agent's own listener
            },
            register=settings.register, report_interval_s=settings.report_interval_ms / 1000.0,
            on_instance_id=self._set_instance_id,
        )

    def _start_sources(self):
        """NVML opened on the GPU thread; every engine scraped once, so the first snapshot has them."""
        self.gpu_sampler.start()
        if self.engines is not None:
            self.engines.start()
            self.engines.prime()

    def _stop_sources(self):
        if self.engines is not None:
            self.engines.stop()
        self.gpu_sampler.stop()

    def start(self):
        """Start serving, sampling and reporting. Raises OSError when the port cannot be bound."""
        self._start_sources()
        settings = self.settings
        self.server = AgentServer(settings.listen_host, settings.listen_port, self.store,
                                  lambda: self.builder.instance_id, settings.max_connections)
        host, port = self._identify(self.server.port)
        self.loop.sample_once()
        self.server.start()
        self.loop.start(first_delay_ms=settings.sample_interval_ms)
        log.info("fleetwatch-agent %s serving on %s:%d as %s", AGENT_VERSION, settings.listen_host,
                 self.server.port, self.builder.instance_id)
        if settings.report:
            self.reporter = self._make_reporter(host, port)
            self.reporter.start()
            if self.engines is not None and any(self.engines.subscribers):
                self.prefix_reporter = self._make_prefix_reporter()
                self.prefix_reporter.start()
            if self.engines is not None and settings.register:
                self.tokenizer_offerer = self._make_tokenizer_offerer()
                self.tokenizer_offerer.start()
        # Everything allocated so far (imported modules, mostly) lives for
        # the whole run; freezing it keeps the collector from re-scanning it.
        gc.freeze()

    def _make_prefix_reporter(self):
        from agent.prefix_reporter import PrefixReporter
        from agent.proxy_client import ProxyClient

        settings = self.settings
        client = ProxyClient(settings.proxy_url, settings.token, settings.http_timeout_s)
        return PrefixReporter(client, self.prefix_sources, lambda: self.builder.instance_id,
                              settings.prefix_block_tokens, on_unknown_instance=self.reporter.forget_registration,
                              interval_s=settings.prefix_interval_ms / 1000.0)

    def _make_tokenizer_offerer(self):
        """The served models' tokenizer files offered to the Proxy (SPEC 16.2), after each register."""
        import os

        from agent.proxy_client import ProxyClient
        from agent.tokenizer_offer import TokenizerOfferer

        settings = self.settings
        client = ProxyClient(settings.proxy_url, settings.token, settings.http_timeout_s)
        reporter = self.reporter
        return TokenizerOfferer(client, self.engines.served, lambda: reporter.registrations,
                                lambda: self.builder.instance_id, on_unknown_instance=reporter.forget_registration,
                                environ=os.environ)

    def stop(self):
        if self.tokenizer_offerer is not None:
            self.tokenizer_offerer.stop()
            self.tokenizer_offerer.close()
        if self.prefix_reporter is not None:
            self.prefix_reporter.stop()
            self.prefix_reporter.close()
        if self.reporter is not None:
            self.reporter.stop()
            self.reporter.unregister()
            self.reporter.close()
        self.loop.stop()
        if self.server is not None:
            self.server.stop()
        self._stop_sources()

    def once(self, out=sys.stdout) -> int:
        """Print one snapshot; report it unless reporting is off. Returns the exit status.

        Two samples one sampling interval apart, so the printed CPU and network
        rates are real rather than the null of a first sample.
        """
        settings = self.settings
        self._start_sources()
        host, port = self._identify(settings.listen_port)
        self.loop.sample_once()
        time.sleep(settings.sample_interval_ms / 1000.0)
        if self.engines is not None and self.builder.engines_on_their_own:
            self.engines.prime()  # no engine thread in --once: the second sample's scrape is asked for here
        self.loop.sample_once()
        snapshot = self.store.latest()
        status = 0 if snapshot is not None else 1
        if snapshot is not None:
            out.write(json.dumps(snapshot, indent=2) + "\n")
            out.flush()
        if settings.report and snapshot is not None:
            self.reporter = self._make_reporter(host, port)
            answer = self.reporter.report_once()
            self.reporter.close()
            if answer.kind != "ok":
                log.error("report to %s failed: %s (use --no-report to only print)", settings.proxy_url,
                          answer.detail or answer.kind)
                status = 1
        self._stop_sources()
        return status


def _url_host(host):
    return f"[{host}]" if ":" in host else host


def run_forever(settings: Settings) -> int:
    """Run until SIGTERM or SIGINT; returns the process exit status."""
    stop = threading.Event()

    def on_signal(signum, _frame):
        log.info("%s received; shutting down", signal.Signals(signum).name)
        stop.set()
        # A second signal during a slow shutdown ends the process at once.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    agent = Agent(settings)
    try:
        agent.start()
    except OSError as error:
        log.error("cannot listen on %s:%d: %s", settings.listen_host, settings.listen_port, error)
        agent.stop()
        return 1
    # No timeout: a signal interrupts the wait, so the idle agent has no
    # periodic wakeup on the main thread.
    stop.wait()
    agent.stop()
    log.info("stopped")
    return 0

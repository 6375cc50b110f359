"""A whole simulator run: in this process, or split over several (``--processes K``).

One event loop runs out of CPU long before the Proxy does on a many-core
host; K processes each drive every K-th instance (``RunConfig.indices``),
all aligned on one start time, so together they keep the even spread of one
process. Each child sends its cumulative stats to the parent every half
second; the parent merges them for the live view and the summary.

Stopping: the parent catches SIGINT/SIGTERM and forwards them to the
children, which run in their own process group so a terminal's Ctrl-C
reaches each of them once, through the parent. First signal: stop
reporting, unregister, report the final stats. Second: abandon in-flight
requests and the unregistering. Third: the parent kills the children. A
child whose parent dies gets SIGTERM (Linux) and stops the same way.
"""

from __future__ import annotations

import asyncio
import ctypes
import multiprocessing
import os
import queue
import signal
import sys
import threading
import time

from simulator.config import RunConfig
from simulator.driver import FleetDriver
from simulator.stats import FleetStats

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
START_TIMEOUT_S = 120.0
# Children start together this long after the last one is ready.
START_DELAY_S = 0.3
PR_SET_PDEATHSIG = 1


def run_fleet(config: RunConfig, on_progress=None) -> FleetStats:
    """Run the simulation to its end (rounds, duration or a signal) and return what it counted."""
    if config.processes <= 1:
        return drive(FleetDriver(config, config.indices(), on_progress=on_progress))
    return ProcessGroup(config, on_progress).run()


def drive(driver: FleetDriver, start_wall_s=None) -> FleetStats:
    """Run one driver on a fresh event loop; stop signals are handled when this is the main thread."""

    async def main():
        loop = asyncio.get_running_loop()
        handled = threading.current_thread() is threading.main_thread()
        if handled:
            for signum in STOP_SIGNALS:
                loop.add_signal_handler(signum, driver.request_stop)
        try:
            return await driver.run(start_wall_s)
        finally:
            if handled:
                for signum in STOP_SIGNALS:
                    loop.remove_signal_handler(signum)

    return asyncio.run(main())


class ProcessGroup:
    """K child processes, each driving its share of the fleet; their stats merged here."""

    def __init__(self, config: RunConfig, on_progress=None):
        self.config = config
        self.on_progress = on_progress
        context = multiprocessing.get_context("spawn")  # no inherited threads, sockets or DB connections
        self.messages = context.Queue()
        self.go = context.Event()
        self.start_wall = context.Value("d", 0.0)
        self.children = [
            context.Process(target=_child_main, name=f"simulate_fleet-{k}",
                            args=(config, k, self.messages, self.go, self.start_wall))
            for k in range(config.processes)
        ]
        self.latest = {k: FleetStats() for k in range(config.processes)}
        self.done = set()
        self.signals = 0

    def run(self) -> FleetStats:
        previous = {signum: signal.signal(signum, self._on_signal) for signum in STOP_SIGNALS}
        try:
            for child in self.children:
                child.start()
            self._start_together()
            while len(self.done) < len(self.children):
                self._collect(timeout_s=0.25)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            for child in self.children:
                child.join(timeout=10)
                if child.is_alive():
                    child.kill()
                    child.join()
        stats = FleetStats.merged(self.latest.values())
        stats.finished = True
        if self.on_progress is not None:
            self.on_progress(stats)
        return stats

    def _start_together(self):
        ready = set()
        deadline = time.monotonic() + START_TIMEOUT_S
        while len(ready | self.done) < len(self.children):
            if time.monotonic() > deadline:
                raise RuntimeError("simulator processes did not start in time")
            message = self._collect(timeout_s=0.25)
            if message is not None and message[0] == "ready":
                ready.add(message[1])
        self.start_wall.value = time.time() + START_DELAY_S
        self.go.set()

    def _collect(self, timeout_s):
        try:
            message = self.messages.get(timeout=timeout_s)
        except queue.Empty:
            self._notice_dead_children()
            return None
        kind, k, wire = message
        if wire is not None:
            self.latest[k] = FleetStats.from_wire(wire)
        if kind == "done":
            self.done.add(k)
        if kind in ("progress", "done") and self.on_progress is not None:
            self.on_progress(FleetStats.merged(self.latest.values()))
        return message

    def _notice_dead_children(self):
        for k, child in enumerate(self.children):
            if k not in self.done and child.exitcode is not None:
                # Died without its final report: keep its last stats and say so.
                self.latest[k].events["crashed_processes"] += 1
                self.latest[k].finished = True
                self.done.add(k)

    def _on_signal(self, signum, frame):
        self.signals += 1
        for child in self.children:
            if child.pid is None or child.exitcode is not None:
                continue
            if self.signals >= 3:
                child.kill()
            else:
                try:
                    os.kill(child.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass


def _child_main(config, k, messages, go, start_wall):
    os.setpgrp()  # the terminal's Ctrl-C goes to the parent only; it forwards each one once
    _die_with_parent()
    stopped = []
    for signum in STOP_SIGNALS:  # until the event loop takes them over
        signal.signal(signum, lambda *_: stopped.append(True))

    def progress(stats):
        messages.put(("progress", k, stats.to_wire()))

    driver = FleetDriver(config, config.indices(k), on_progress=progress)
    messages.put(("ready", k, None))
    while not go.wait(0.5):
        if stopped:
            messages.put(("done", k, FleetStats().to_wire()))
            return
    if stopped:
        messages.put(("done", k, FleetStats().to_wire()))
        return
    stats = drive(driver, start_wall_s=start_wall.value)
    for signum in STOP_SIGNALS:  # done: a late signal must not interrupt the final report
        signal.signal(signum, signal.SIG_IGN)
    messages.put(("done", k, stats.to_wire()))


def _die_with_parent():
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        except OSError:
            pass

"""Start, watch and stop the processes of ``manage.py up``.

Children run in their own sessions so a terminal's Ctrl-C reaches only the
supervisor, which then stops them in two waves within one grace period
(``FLEETWATCH_STOP_GRACE_S``): first, all at once, every child but the web
server (the agent and the link unregister through it), then the web server
with what is left of the period; whatever has not exited by the end of the
period is killed with every process it started (its process group), and
so is whatever an exited child left running. On Linux each child also gets
SIGTERM if the supervisor dies.

Written here rather than taken from supervisord, honcho or circus because
``up`` needs two things those do not give together in a few lines: a
shutdown in reverse start order (the agent and the link unregister through
a web server that must still be up), and children that are not essential
(a local agent whose port is taken must not stop the control plane).
"""

import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

log = logging.getLogger("fleetwatch.up")

PR_SET_PDEATHSIG = 1


def _die_with_parent():
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass  # not Linux: children outlive a killed supervisor, as with any shell


@dataclass(frozen=True)
class ProcessSpec:
    """A process an app asks ``up`` to run: its name, command line and extra environment."""

    name: str
    argv: list
    env: dict = field(default_factory=dict)
    essential: bool = True


def _lower_priority(niceness):
    """This process's niceness raised by ``niceness``, and its session's: with the kernel's autogroups on (a
    desktop kernel's default, and Debian's), the scheduler shares a core between sessions first, so a child in a
    session of its own yields to the others only when its autogroup's niceness says so (sched(7))."""
    os.nice(niceness)
    try:
        with open("/proc/self/autogroup", "w") as autogroup:
            autogroup.write(str(niceness))
    except OSError:
        pass  # no autogroups (or not Linux): the process's niceness is what the scheduler reads


@dataclass
class Child:
    name: str
    argv: list
    env: dict
    essential: bool = True
    niceness: int = 0
    process: subprocess.Popen | None = None

    def _preexec(self):
        if sys.platform.startswith("linux"):
            _die_with_parent()
        if self.niceness:
            _lower_priority(self.niceness)

    def start(self):
        self.process = subprocess.Popen(self.argv, env=self.env, start_new_session=True, preexec_fn=self._preexec)
        log.info("started %s (pid %s)", self.name, self.process.pid)

    def exited(self):
        return self.process is not None and self.process.poll() is not None

    def terminate(self):
        """Ask it to stop (SIGTERM); True if it was still running."""
        if self.process is None or self.process.poll() is not None:
            return False
        self.process.terminate()
        return True

    def wait_or_kill(self, deadline, monotonic=time.monotonic):
        """Wait for it until ``deadline`` (monotonic seconds), then kill it and every process it started."""
        try:
            self.process.wait(max(0.0, deadline - monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop within the grace period; killing it", self.name)
            self.kill_group()
            self.process.wait()

    def kill_group(self):
        """SIGKILL its session's process group (it leads one: ``start_new_session``), not only itself:
        granian's workers outlive a killed granian and go on answering on the port it shared with them."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:  # gone already, and with it every process of its group
            pass


class Supervisor:
    def __init__(self, grace_s=20.0, last="web"):
        self.children = []
        self.grace_s = grace_s
        self.last = last  # the child stopped after all the others
        self.stopping = False

    def add(self, name, argv, env, essential=True, niceness=0):
        """Start a child (``niceness``: how much lower its CPU priority is); when an essential one dies,
        everything stops."""
        child = Child(name, argv, env, essential, niceness)
        self.children.append(child)
        child.start()
        return child

    def request_stop(self, *_):
        self.stopping = True

    def install_signal_handlers(self):
        signal.signal(signal.SIGINT, self.request_stop)
        signal.signal(signal.SIGTERM, self.request_stop)

    def watch(self, poll_s=0.5):
        """Block until asked to stop (returns 0) or a child dies (returns 1)."""
        while not self.stopping:
            for child in list(self.children):
                if not child.exited():
                    continue
                if not child.essential:
                    log.warning("%s exited with code %s; the rest keeps running", child.name, child.process.returncode)
                    self.children.remove(child)
                    continue
                log.error("%s exited with code %s; stopping everything", child.name, child.process.returncode)
                self.stop_all()
                return 1
            time.sleep(poll_s)
        self.stop_all()
        return 0

    def stop_all(self):
        """Stop every child within ``grace_s`` in all: the others together, then ``last``."""
        deadline = time.monotonic() + self.grace_s
        first = [child for child in self.children if child.name != self.last]
        for wave in (first, [child for child in self.children if child.name == self.last]):
            stopping = [child for child in wave if child.terminate()]
            for child in stopping:
                child.wait_or_kill(deadline)
            if stopping:
                log.info("stopped %s", ", ".join(child.name for child in stopping))
        for child in self.children:  # what an exited child left behind (a crashed granian's workers)
            child.kill_group()
        self.children = []


def child_env(**overrides):
    env = dict(os.environ)
    env.update({key: str(value) for key, value in overrides.items() if value is not None})
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env

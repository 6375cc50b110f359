"""Start, watch and stop the processes of ``manage.py up``.

Children run in their own sessions so a terminal's Ctrl-C reaches only the
supervisor, which then stops them in order (agent and link first, so they can
still unregister through the web server, then the q cluster, then the web
server). On Linux each child also gets SIGTERM if the supervisor dies.

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


class Child:
    def __init__(self, name, argv, env, essential=True):
        self.name = name
        self.argv = argv
        self.env = env
        self.essential = essential
        self.process = None

    def start(self):
        preexec = _die_with_parent if sys.platform.startswith("linux") else None
        self.process = subprocess.Popen(self.argv, env=self.env, start_new_session=True, preexec_fn=preexec)
        log.info("started %s (pid %s)", self.name, self.process.pid)

    def exited(self):
        return self.process is not None and self.process.poll() is not None

    def stop(self, timeout_s):
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop in %.0f s; killing it", self.name, timeout_s)
            self.process.kill()
            self.process.wait()


class Supervisor:
    def __init__(self, stop_timeout_s=15.0):
        self.children = []
        self.stop_timeout_s = stop_timeout_s
        self.stopping = False

    def add(self, name, argv, env, essential=True):
        """Start a child; when an essential one dies, everything stops."""
        child = Child(name, argv, env, essential)
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
        for child in reversed(self.children):
            child.stop(self.stop_timeout_s)
        self.children = []


def child_env(**overrides):
    env = dict(os.environ)
    env.update({key: str(value) for key, value in overrides.items() if value is not None})
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env

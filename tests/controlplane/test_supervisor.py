"""``up``'s supervisor stops its children together, the web server last, within one grace period.

The children are real processes. Each writes, on SIGTERM, the system's
monotonic clock (one clock for every process of the machine) to a file, so
the test reads the order in which they were asked to stop and ended.
"""

import os
import sys
import time
from pathlib import Path

from controlplane.ops.supervisor import Supervisor, child_env

CHILD = """
import signal, sys, time
name, log, linger = sys.argv[1], sys.argv[2], float(sys.argv[3])
def on_term(*_):
    with open(log, "a") as out:
        out.write(f"{name} term {time.monotonic()}\\n")
    if linger >= 0:
        time.sleep(linger)
        with open(log, "a") as out:
            out.write(f"{name} exit {time.monotonic()}\\n")
        sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
with open(log, "a") as out:
    out.write(f"{name} up {time.monotonic()}\\n")
while True:
    time.sleep(0.05)
"""


def start(tmp_path, lingers, grace_s):
    log = tmp_path / "events"
    supervisor = Supervisor(grace_s=grace_s)
    for name, linger in lingers.items():
        supervisor.add(name, [sys.executable, "-c", CHILD, name, str(log), str(linger)], child_env())
    deadline = time.monotonic() + 30
    while log.read_text().count(" up ") < len(lingers) if log.exists() else True:
        assert time.monotonic() < deadline, "the children did not start"
        time.sleep(0.05)
    return supervisor, log


def events(log):
    found = {}
    for line in log.read_text().splitlines():
        name, event, at = line.split()
        found[(name, event)] = float(at)
    return found


def test_the_others_stop_together_and_the_web_server_after_them(tmp_path):
    supervisor, log = start(tmp_path, {"web": 0.0, "tasks": 0.5, "link": 0.5, "agent": 0.5}, grace_s=20)
    children = list(supervisor.children)
    supervisor.stop_all()
    seen = events(log)
    others = ("tasks", "link", "agent")
    # Every other child was asked to stop before any of them had finished: in parallel, not in turn.
    assert max(seen[(name, "term")] for name in others) < min(seen[(name, "exit")] for name in others)
    assert seen[("web", "term")] > max(seen[(name, "exit")] for name in others)
    assert [child.process.returncode for child in children] == [0, 0, 0, 0]


def test_children_that_ignore_sigterm_are_killed_when_the_one_grace_period_ends(tmp_path):
    # A linger of -1: the child notes SIGTERM and carries on.
    supervisor, log = start(tmp_path, {"web": -1, "tasks": -1, "link": -1, "recorder": -1}, grace_s=1.0)
    children = list(supervisor.children)
    started = time.monotonic()
    supervisor.stop_all()
    took = time.monotonic() - started
    assert [child.process.returncode for child in children] == [-9, -9, -9, -9]
    # The others had SIGTERM first; the web server's turn comes with the period spent, so it is killed at once.
    assert {name for name, event in events(log) if event == "term"} >= {"tasks", "link", "recorder"}
    # One period for all of them, not one each (four stubborn children in turn would take 4 s or more).
    assert 1.0 <= took < 2.5


# A child that starts a process of its own (as granian starts its workers), writes that process's pid to a
# file, and then, by its argument, ignores SIGTERM ("stubborn") or exits at once leaving it behind ("leaves").
PARENT = """
import signal, subprocess, sys, time
pid_file, mode = sys.argv[1], sys.argv[2]
worker = subprocess.Popen([sys.executable, "-c",
                           "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
with open(pid_file, "w") as out:
    out.write(str(worker.pid))
signal.signal(signal.SIGTERM, signal.SIG_IGN if mode == "stubborn" else lambda *_: sys.exit(0))
while True:
    time.sleep(0.05)
"""


def running(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # Not reaped yet (its parent is gone): a zombie is not running.
    return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"


def test_the_processes_a_child_started_are_killed_with_it(tmp_path):
    supervisor = Supervisor(grace_s=1.0)
    pid_files = {mode: tmp_path / f"{mode}.pid" for mode in ("stubborn", "leaves")}
    for mode, pid_file in pid_files.items():
        supervisor.add("web" if mode == "stubborn" else mode, [sys.executable, "-c", PARENT, str(pid_file), mode],
                       child_env())
    deadline = time.monotonic() + 30
    while not all(path.exists() and path.read_text() for path in pid_files.values()):
        assert time.monotonic() < deadline, "the children did not start their workers"
        time.sleep(0.05)
    workers = {mode: int(path.read_text()) for mode, path in pid_files.items()}
    assert all(running(pid) for pid in workers.values())

    supervisor.stop_all()

    # Killed with the web server that outlived the period, and after the child that exited without it:
    # a granian killed alone leaves workers answering on its port.
    deadline = time.monotonic() + 10
    while any(running(pid) for pid in workers.values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert {mode: running(pid) for mode, pid in workers.items()} == {"stubborn": False, "leaves": False}

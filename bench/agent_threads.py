"""The agent's CPU per thread, for ``bench/agent_overhead.py --threads`` (Linux only).

CPU times come from ``/proc/PID/task/TID/stat`` (the kernel's ticks, as
``psutil``'s process total). Python 3.11 does not name its threads for the
kernel, so the names come from ``py-spy dump`` (the bench extra) when it is
installed, else the kernel's names (``python``, ``ZMQbg/IO/0``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PY_SPY_THREAD = re.compile(r'^Thread (\d+) \(\w+\): "([^"]*)"', re.M)


def thread_cpu(pid) -> dict:
    """``{tid: (kernel name, cpu seconds)}`` of every thread of ``pid``; empty where /proc is not there."""
    out = {}
    tasks = Path(f"/proc/{pid}/task")
    if not tasks.is_dir():
        return out
    for task in tasks.iterdir():
        try:
            stat = (task / "stat").read_text()
            comm = (task / "comm").read_text().strip()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        out[int(task.name)] = (comm, (int(fields[11]) + int(fields[12])) / TICKS_PER_S)
    return out


def thread_names(pid) -> dict:
    """``{tid: Python thread name}`` from ``py-spy dump``, or empty without py-spy."""
    py_spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if py_spy is None:
        return {}
    try:
        dump = subprocess.run([py_spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return {int(tid): name for tid, name in _PY_SPY_THREAD.findall(dump.stdout)}


def thread_report(before: dict, after: dict, names: dict | None, wall_s: float) -> str:
    """One line per thread that used CPU, busiest first, as % of one core over ``wall_s``."""
    rows = []
    for tid, (comm, cpu_s) in after.items():
        used = cpu_s - before.get(tid, (comm, 0.0))[1]
        if used > 0:
            rows.append((used, (names or {}).get(tid, comm)))
    rows.sort(reverse=True)
    return "  threads: " + ", ".join(f"{name} {100.0 * used / wall_s:.3f} %" for used, name in rows)

"""``./fw test`` runs both databases whatever the first gives; ``./fw`` tells its commands where it was run from.

``run_tests`` is run as the script defines it (the script sourced, which defines its functions and runs
nothing) with real pytest runs of a small test file; only its installers (apt packages, PostgreSQL, Redis,
vLLM) are left out, since this suite runs after them.
"""

import os
import signal
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INSTALLERS = ("ensure_packages", "ensure_postgres", "ensure_redis", "ensure_vllm")

# Fails where it runs on SQLite (no DATABASE_URL), passes on PostgreSQL; notes each run.
FAILS_ON_SQLITE = """
import os
from pathlib import Path

def test_a_database_dependent_result():
    url = os.environ.get("DATABASE_URL", "sqlite")
    with open(Path(__file__).with_name("runs"), "a") as runs:
        runs.write(url.split(":")[0] + "\\n")
    assert url.startswith("postgres")
"""

# Notes that it runs, then waits far longer than the test that interrupts it.
WAITS = """
import os, time
from pathlib import Path

def test_a_slow_one():
    with open(Path(__file__).with_name("runs"), "a") as runs:
        runs.write(os.environ.get("DATABASE_URL", "sqlite").split(":")[0] + "\\n")
    time.sleep(300)
"""


def run_tests_argv(tmp_path, test_file):
    """``run_tests`` of ./fw, its installers left out, on ``test_file`` alone (none of the suite's settings)."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    skip = "; ".join(f"{name}() {{ :; }}" for name in INSTALLERS)
    script = f'source ./fw; {skip}; run_tests "$@"'
    return ["bash", "-c", script, "fw", "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path),
            "-p", "no:django", "-p", "no:cacheprovider", "-q", str(test_file)]


def test_fw_test_runs_postgresql_after_a_failure_on_sqlite_and_sums_up_both(tmp_path):
    (tmp_path / "test_one.py").write_text(FAILS_ON_SQLITE)
    result = subprocess.run(run_tests_argv(tmp_path, tmp_path / "test_one.py"), cwd=ROOT, capture_output=True,
                            text=True, timeout=300)

    assert (tmp_path / "runs").read_text().split() == ["sqlite", "postgres"], result.stderr
    assert result.returncode == 1, result.stderr
    summary = [line for line in result.stderr.splitlines() if line.startswith("fw: ")]
    assert len(summary) == 2, result.stderr
    assert summary[0].startswith("fw: SQLite: FAILED (pytest exit 1): 1 failed in "), summary
    assert summary[1].startswith("fw: PostgreSQL: passed: 1 passed in "), summary


def test_ctrl_c_during_sqlite_ends_the_run_there(tmp_path):
    (tmp_path / "test_slow.py").write_text(WAITS)
    # A session of its own: Ctrl-C reaches the terminal's whole foreground group, fw and pytest both.
    process = subprocess.Popen(run_tests_argv(tmp_path, tmp_path / "test_slow.py"), cwd=ROOT, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "runs").exists():
            assert time.monotonic() < deadline and process.poll() is None, "the SQLite run did not start"
            time.sleep(0.1)
        os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 2, stderr
    assert (tmp_path / "runs").read_text().split() == ["sqlite"]
    summary = [line for line in stderr.splitlines() if line.startswith("fw: ")]
    assert summary[-1] == "fw: PostgreSQL: not run (interrupted)", stderr
    assert summary[0].startswith("fw: SQLite: FAILED (pytest exit 2)"), stderr


def test_it_tells_the_commands_where_it_was_run_from(tmp_path):
    # ./fw works in the repository; a relative path on a command line is the caller's (simulate_fleet --json).
    result = subprocess.run(["bash", "-c", f'source {ROOT}/fw; echo "$FLEETWATCH_CALLER_DIR"; pwd'], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert result.stdout.split() == [str(tmp_path), str(ROOT)], result.stderr

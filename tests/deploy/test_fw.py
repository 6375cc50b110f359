"""``./fw test`` runs both databases whatever the first gives; ``./fw`` tells its commands where it was run from.

``run_tests`` is run as the script defines it (the script sourced, which defines its functions and runs
nothing) with real pytest runs of a small test file; only its installers (apt packages, PostgreSQL, Redis,
vLLM) are left out, since this suite runs after them.
"""

import subprocess
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


def run_tests(tmp_path, *pytest_args):
    skip = "; ".join(f"{name}() {{ :; }}" for name in INSTALLERS)
    script = f'source ./fw; {skip}; run_tests "$@"'
    return subprocess.run(["bash", "-c", script, "fw", *pytest_args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_fw_test_runs_postgresql_after_a_failure_on_sqlite_and_sums_up_both(tmp_path):
    (tmp_path / "test_one.py").write_text(FAILS_ON_SQLITE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    result = run_tests(tmp_path, "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path),
                       "-p", "no:django", "-p", "no:cacheprovider", "-q", str(tmp_path / "test_one.py"))

    assert (tmp_path / "runs").read_text().split() == ["sqlite", "postgres"], result.stderr
    assert result.returncode == 1, result.stderr
    summary = [line for line in result.stderr.splitlines() if line.startswith("fw: ")]
    assert len(summary) == 2, result.stderr
    assert summary[0].startswith("fw: SQLite: FAILED (pytest exit 1): 1 failed in "), summary
    assert summary[1].startswith("fw: PostgreSQL: passed: 1 passed in "), summary


def test_it_tells_the_commands_where_it_was_run_from(tmp_path):
    # ./fw works in the repository; a relative path on a command line is the caller's (simulate_fleet --json).
    result = subprocess.run(["bash", "-c", f'source {ROOT}/fw; echo "$FLEETWATCH_CALLER_DIR"; pwd'], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert result.stdout.split() == [str(tmp_path), str(ROOT)], result.stderr

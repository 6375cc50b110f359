"""``./fw`` without a command: its usage and nothing else (it installs nothing, so this is quick)."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def fw(*args):
    return subprocess.run([str(ROOT / "fw"), *args], cwd=ROOT, capture_output=True, text=True, timeout=30)


def test_without_a_command_it_prints_its_usage_only():
    result = fw()

    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0] == "usage: ./fw COMMAND [ARGS]"
    assert [line.split()[0] for line in lines[1:]] == ["up", "test", "manage", "screenshots", "lock"]
    assert "set -" not in result.stdout and "#" not in result.stdout


def test_an_unknown_command_gets_the_usage_on_stderr_and_fails():
    result = fw("no-such-command")

    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("usage: ./fw COMMAND [ARGS]")

"""``./fw`` without a command: its usage and nothing else (it installs nothing, so this is quick)."""

import argparse
import subprocess
from pathlib import Path

from controlplane.management.commands.up import Command as Up

ROOT = Path(__file__).resolve().parents[2]


def fw(*args):
    return subprocess.run([str(ROOT / "fw"), *args], cwd=ROOT, capture_output=True, text=True, timeout=30)


def test_without_a_command_it_prints_its_usage_only():
    result = fw()

    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0] == "usage: ./fw COMMAND [ARGS]"
    # Each command on a line of its own (two spaces in), what it does on the next (five).
    assert [line.split()[0] for line in lines[1::2]] == ["up", "test", "manage", "screenshots", "lock"]
    assert all(line.startswith("     ") and line[5] != " " for line in lines[2::2])
    assert "set -" not in result.stdout and "#" not in result.stdout


def test_an_unknown_command_gets_the_usage_on_stderr_and_fails():
    result = fw("no-such-command")

    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("usage: ./fw COMMAND [ARGS]")


def test_its_usage_names_every_option_of_up():
    [up_line] = [line for line in fw().stdout.splitlines() if line.startswith("  up ")]
    parser = argparse.ArgumentParser(add_help=False)
    Up().add_arguments(parser)  # up's own options, without Django's common ones
    options = {option for action in parser._actions for option in action.option_strings}
    assert options == {"--host", "--port", "--no-agent", "--workers", "--agent-listen", "--route-port", "--no-migrate"}
    assert {option for option in options if option not in up_line} == set()

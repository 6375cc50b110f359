"""The control plane's systemd units (deploy/systemd/) pass ``systemd-analyze verify``, and run real commands.

The units name the paths of the README's install (/opt/fleetwatch/venv,
/opt/fleetwatch/app, /etc/fleetwatch/fleetwatch.env); verify checks that
every ExecStart binary exists, so the test verifies copies pointing at this
checkout, its venv and the example env file instead. verify reports unknown
keys and bad values as warnings with exit code 0, so its output must be
empty too.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import get_commands

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "deploy" / "systemd"
SERVICES = ("web", "route", "tasks", "recorder", "link")


def installed_here(tmp_path):
    venv = Path(sys.executable).parent.parent
    for unit in [*UNITS.glob("*.service"), *UNITS.glob("*.target")]:
        text = (unit.read_text().replace("/opt/fleetwatch/venv", str(venv)).replace("/opt/fleetwatch/app", str(ROOT))
                .replace("/etc/fleetwatch/fleetwatch.env", str(UNITS / "fleetwatch.env.example")))
        (tmp_path / unit.name).write_text(text)
    return sorted(path.name for path in tmp_path.iterdir())


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed here (Debian's systemd package); CI's image has it")
def test_systemd_analyze_verify_accepts_every_unit(tmp_path):
    names = installed_here(tmp_path)
    assert {f"fleetwatch-{name}.service" for name in SERVICES} | {"fleetwatch.target"} <= set(names)
    result = subprocess.run(["systemd-analyze", "verify", "--man=no", *names], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120, env={"SYSTEMD_LOG_LEVEL": "notice", "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert result.stdout + result.stderr == ""


def test_the_target_starts_every_service_and_each_runs_a_real_command():
    target = (UNITS / "fleetwatch.target").read_text()
    commands = get_commands()
    for name in SERVICES:
        assert f"fleetwatch-{name}.service" in target
        unit = (UNITS / f"fleetwatch-{name}.service").read_text()
        assert "WantedBy=fleetwatch.target" in unit and "PartOf=fleetwatch.target" in unit
        assert "Requires=fleetwatch-migrate.service" in unit
    for unit in UNITS.glob("*.service"):
        for command in re.findall(r"manage\.py (\w+)", unit.read_text()):
            assert command in commands, (unit.name, command)
    for name in ("web", "route"):
        assert "controlplane.wsgi:application" in (UNITS / f"fleetwatch-{name}.service").read_text()
    route = (UNITS / "fleetwatch-route.service").read_text()
    assert "CPUWeight=10" in route and "Nice=10" in route and "FLEETWATCH_ROUTE_SHARE=1" in route

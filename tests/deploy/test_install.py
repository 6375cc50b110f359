"""What ``pip install '.[server]'`` brings, resolved by pip itself against the lock file.

pip's ``--dry-run --report`` resolves the install exactly as a fresh venv
would (``--ignore-installed``) without installing anything. It reads the
package index, so the test is marked ``network``; it fails, not skips, when
the index cannot be reached.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements" / "lock.txt"
TOOLS = {"pytest", "pytest-django", "playwright", "schemathesis", "hypothesis", "time-machine", "gunicorn",
         "py-spy", "pip-tools"}
SIMULATOR = {"aiohttp", "rich"}


def resolved(tmp_path, extras):
    report = tmp_path / "report.json"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
         "--disable-pip-version-check", "--report", str(report), "--constraint", str(LOCK), f".[{extras}]"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    installs = json.loads(report.read_text())["install"]
    return {item["metadata"]["name"].lower().replace("_", "-"): item["metadata"]["version"] for item in installs}


@pytest.mark.network
def test_the_server_extra_brings_no_test_bench_or_simulator_tools(tmp_path):
    packages = resolved(tmp_path, "server")
    assert {"django", "granian", "psycopg", "django-q2", "prometheus-client"} <= packages.keys()
    assert not packages.keys() & (TOOLS | SIMULATOR), sorted(packages.keys() & (TOOLS | SIMULATOR))


@pytest.mark.network
def test_the_lock_pins_every_package_of_an_install(tmp_path):
    locked = dict(line.split("==") for line in LOCK.read_text().splitlines() if "==" in line)
    packages = resolved(tmp_path, "server,sim")
    assert {"aiohttp", "yarl", "rich"} <= packages.keys()
    for name, version in packages.items():
        if name != "fleetwatch":
            assert locked.get(name) == version, name

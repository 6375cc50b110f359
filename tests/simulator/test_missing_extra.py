"""``manage.py simulate_fleet`` in an environment without the ``sim`` extra (as ``pip install '.[server]'``
makes, docs/scale-out.md): it says what to install and exits 2, without a traceback.

The command runs in a real ``manage.py`` process whose imports cannot find the package named: a finder
placed first on ``sys.meta_path`` answers ``ModuleNotFoundError`` for it, as Python does for a package
that is not installed.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

WITHOUT = """
import runpy, sys
hidden = sys.argv.pop(1)

class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name == hidden or name.startswith(hidden + "."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
sys.argv[0] = "manage.py"
runpy.run_path("manage.py", run_name="__main__")
"""


@pytest.mark.parametrize("package", ["rich", "aiohttp"])
def test_it_names_the_extra_to_install_and_exits_2(tmp_path, package):
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT, package, "simulate_fleet", "--instances", "3", "--token", "x"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "FLEETWATCH_VAR_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)})

    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert f"this environment has no {package}" in result.stderr
    assert "pip install --constraint requirements/lock.txt '.[sim]'" in result.stderr
    assert "./fw manage simulate_fleet" in result.stderr
    assert result.stdout == ""

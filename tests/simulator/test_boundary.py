"""The simulator is a client of the Proxy: its engine runs without Django (only its command needs it)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import json, sys
import simulator.cli, simulator.display, simulator.driver, simulator.model
import simulator.processes, simulator.stats
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


def test_it_imports_no_django():
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={"PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    imported = set(json.loads(result.stdout.splitlines()[-1]))
    assert "django" not in imported and "rest_framework" not in imported
    assert {"aiohttp", "orjson", "rich", "agent"} <= imported

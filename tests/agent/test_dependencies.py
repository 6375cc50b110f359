"""The agent installs alone on GPU hosts: stdlib, psutil and nvidia-ml-py only."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {"agent", "psutil", "pynvml"}
PROBE = """
import json, sys
before = set(sys.modules)
import agent.__main__, agent.app, agent.reporter, agent.server, agent.gpu.monitor, agent.sampler, agent.snapshot
import agent.engines.scraper, agent.engines.figures, agent.engines.reading, agent.engines.exposition
import agent.gpu.xid_events, agent.gpu.health, agent.gpu.watch
import agent.capabilities, agent.launch
import agent.engines.kv_events, agent.engines.kv_index, agent.engines.kv_subscriber, agent.prefix_reporter
import agent.proxy_client
agent.gpu.monitor.GpuMonitor().open()  # loads pynvml the way the agent does
print(json.dumps(sorted({name.split(".")[0] for name in set(sys.modules) - before})))
"""


def test_it_imports_nothing_but_its_declared_dependencies():
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    imported = set(json.loads(result.stdout.splitlines()[-1]))
    third_party = {name for name in imported if name not in sys.stdlib_module_names and not name.startswith("_")}
    assert "django" not in imported
    assert third_party <= ALLOWED, third_party - ALLOWED
    assert {"agent", "psutil", "pynvml"} <= imported

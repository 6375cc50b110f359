"""Doc examples run as written (the Proxy's address aside) against a Proxy that ``up`` serves, with auth on as
a default ``./fw up`` has it; and the docs' blocks that build on each other paste in order."""

import os
import re
import signal
import subprocess
import sys

import pytest
import requests

from tests.live import ROOT, wait_for

pytestmark = pytest.mark.live


def sh_blocks(doc, after):
    """The ``sh`` blocks of ``doc`` from the first line containing ``after`` on."""
    text = (ROOT / "docs" / doc).read_text()
    return re.findall(r"```sh\n(.*?)```", text[text.index(after):], re.S)


def read_token(server):
    done = subprocess.run([sys.executable, str(ROOT / "manage.py"), "create_token", "--scope", "read", "--name",
                           "reader"], cwd=ROOT, env=server.env(), capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def test_the_agents_end_to_end_example_reports_to_a_default_up(servers):
    # It had no token (401 forever against a default `up`) and ran the system python (no psutil there).
    server = servers(roles="proxy", env={"FLEETWATCH_TRUSTED_NETWORKS": ""}).start()
    [block] = sh_blocks("agent.md", "For an end-to-end test")[:1]
    script = block.replace("http://127.0.0.1:8000", server.url)
    agent = subprocess.Popen(["bash", "-c", script], cwd=ROOT, env=server.env(), start_new_session=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        headers = {"Authorization": f"Bearer {read_token(server)}"}

        def reported():
            rows = requests.get(server.url + "/v1/instance/list", headers=headers, timeout=5).json()
            return [row for row in rows if row["instance_id"] == "e2e-1" and row["status"] == "alive"
                    and (row.get("resource") or {}).get("report_seq")]

        assert wait_for(reported, timeout_s=60, message="e2e-1 reporting"), agent.stdout
    finally:
        os.killpg(agent.pid, signal.SIGTERM)
        agent.wait(10)


def test_the_simulators_blocks_paste_in_order():
    # Each block made the token again: the second `create_token --name simulator` failed, $SIM was empty, and the
    # simulator said "pass --token" although the reader had.
    blocks = sh_blocks("simulator.md", "## Run it")
    names, ups, defined = [], 0, set()
    for block in blocks:
        if "simulate_fleet" not in block or "http://127.0.0.1:8000" not in block and "--proxy-url" in block:
            continue  # the scripts' and the benchmarks' own runs, on servers of their own
        ups += len(re.findall(r"^\./fw up\b", block, re.M))
        names += re.findall(r"create_token [^\n]*--name (\S+)", block)
        defined |= set(re.findall(r"^(\w+)=", block, re.M))
        used = set(re.findall(r"\$(\w+)", block)) - {"PWD"}
        assert used <= defined, (used - defined, block)
    assert ups == 1 and len(names) == len(set(names)) >= 2, (ups, names)

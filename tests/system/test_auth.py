"""Auth on by default over real HTTP: up hands tokens to what it starts; strangers get 401."""

import subprocess
import sys

import pytest
import requests

from tests.live import ROOT, wait_for

pytestmark = pytest.mark.live

# No trusted network here: every request needs a token, as on a fresh install.
LIVE_ENV = {"FLEETWATCH_TRUSTED_NETWORKS": "", "FLEETWATCH_PROXY_HEARTBEAT_S": "1"}
DEADLINE_S = 90


def create_token(server, *args):
    result = subprocess.run([sys.executable, str(ROOT / "manage.py"), "create_token", *args], cwd=ROOT,
                            env=server.env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()[-1]


def test_it_works_out_of_the_box_with_auth_on(servers):
    server = servers(agent=True, env=LIVE_ENV).start()
    anonymous = requests.get(server.url + "/v1/instance/list", timeout=10)
    assert anonymous.status_code == 401 and anonymous.headers["WWW-Authenticate"] == "Bearer"
    assert requests.post(server.url + "/v1/instance/register", json={"host": "h", "port": 1},
                         timeout=10).status_code == 401

    reader = {"Authorization": f"Bearer {create_token(server, '--scope', 'read', '--name', 'tester')}"}

    def get(path):
        response = requests.get(server.url + path, headers=reader, timeout=10)
        response.raise_for_status()
        return response.json()

    # The local agent reports with the token up gave it, and the link registers with its own.
    rows = wait_for(lambda: [r for r in get("/v1/instance/list") if r["resource"]["cpu_util"] is not None],
                    timeout_s=DEADLINE_S, message="the local agent's reports")
    assert rows[0]["is_alive"] is True
    link = wait_for(lambda: (get("/debug/status")["scheduler_link"] or {}).get("registered"), timeout_s=DEADLINE_S,
                    message="the link to register")
    assert link is True
    listing = subprocess.run([sys.executable, str(ROOT / "manage.py"), "list_tokens"], cwd=ROOT, env=server.env(),
                             capture_output=True, text=True, timeout=120).stdout
    assert "up-local-agent" in listing and "up-link" in listing and "tester" in listing


def test_it_refuses_an_agent_with_a_revoked_token(servers, agents):
    server = servers(roles="proxy", env=LIVE_ENV).start()
    secret = create_token(server, "--scope", "instance", "--name", "e2e-agent", "--instance-id", "e2e-auth")
    agent = agents(server, "e2e-auth", args=["--token", secret])
    reader = {"Authorization": f"Bearer {create_token(server, '--scope', 'read', '--name', 'tester')}"}

    def reported():
        rows = requests.get(server.url + "/v1/instance/list", headers=reader, timeout=10).json()
        return rows and rows[0]["resource"]["report_seq"]

    first = wait_for(reported, timeout_s=DEADLINE_S, message="reports with the agent's token")
    revoked_at = agent.log_offset()
    subprocess.run([sys.executable, str(ROOT / "manage.py"), "revoke_token", "e2e-agent"], cwd=ROOT,
                   env=server.env(), check=True, capture_output=True, timeout=120)
    wait_for(lambda: "HTTP 401" in agent.log_since(revoked_at), timeout_s=DEADLINE_S,
             message="the agent to be refused")
    assert agent.running()  # it backs off and keeps sampling; it does not crash
    assert reported() >= first

"""``manage.py up`` refuses a web port another server holds, and a port that is no port, before it starts
anything: granian binds with SO_REUSEPORT, so a second ``up`` on a taken port started anyway and shared it, its
requests and reports split between two control planes (issue 47)."""

import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def up(*args):
    return subprocess.run([sys.executable, str(ROOT / "manage.py"), "up", "--no-agent", "--no-migrate", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_it_refuses_a_web_port_another_server_listens_on():
    with socket.socket() as taken:  # as granian listens: SO_REUSEPORT, which a second granian would share
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = up("--port", str(port), "--route-port", "0")
    assert done.returncode != 0
    assert f"port {port} (the web port) is taken at 127.0.0.1" in done.stderr
    assert "Fleetwatch is up" not in done.stdout


def test_it_refuses_a_route_port_asked_for_that_is_taken():
    with socket.socket() as web, socket.socket() as taken:
        web.bind(("127.0.0.1", 0))
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port, route_port = web.getsockname()[1], taken.getsockname()[1]
        web.close()
        done = up("--port", str(port), "--route-port", str(route_port))
    assert done.returncode != 0
    assert f"port {route_port} (the route listener's, asked for) is taken" in done.stderr


@pytest.mark.parametrize("args", [["--port", "99999"], ["--port", "0"], ["--port", "x"], ["--route-port", "70000"]])
def test_a_port_out_of_range_is_a_usage_error(args):
    done = up(*args)
    assert done.returncode == 2, done.stderr
    assert "usage: manage.py up" in done.stderr and "is not a port" in done.stderr
    assert "Traceback" not in done.stderr

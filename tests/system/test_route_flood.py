"""A routing flood against ``up`` is refused past the route lane's share while the agents' reports are answered,
and the route listener answers one in processes of its own at a lower priority (issue 30, item 2): on the real
web server (granian, two processes), on the suite's database."""

import contextlib
import os
import threading
import time
from collections import Counter

import psutil
import pytest
import requests

from tests.factories import make_engine, make_snapshot
from tests.live import free_port

pytestmark = pytest.mark.live

FLOOD_CLIENTS = 48
FLOOD_S = 4.0


def flood(url, stop, answers, lock, path="/v1/placement"):
    """Ask placement again as soon as answered (a router that ignores Retry-After), until ``stop``."""
    session = requests.Session()
    while not stop.is_set():
        response = session.post(url + path, json={"model": "tiny"}, timeout=30)
        body = response.json()
        with lock:
            answers[(response.status_code, response.headers.get("Retry-After"), body.get("error"))] += 1


def reports_under_a_flood(server, flood_url):
    """Reports of one instance to ``server`` every 50 ms while ``FLOOD_CLIENTS`` routers flood ``flood_url``:
    ``(the reports' (status, body), the flood's answers by (status, Retry-After, error))``."""
    reporter = requests.Session()
    reporter.post(server.url + "/v1/instance/register", json={"instance_id": "i-1", "host": "10.0.0.1",
                                                              "port": 8000}, timeout=30).raise_for_status()

    def report(seq):
        snapshot = make_snapshot(engines=[make_engine(scraped_at_ms=int(time.time() * 1000))])
        response = reporter.post(server.url + "/v1/instance/resource_snapshot", timeout=30, json={
            "instance_id": "i-1", "snapshot": snapshot, "metadata": {"report_seq": seq}})
        return response.status_code, tuple(response.json().items())

    assert report(1) == (200, (("ok", True),))
    stop, lock, answers = threading.Event(), threading.Lock(), Counter()
    clients = [threading.Thread(target=flood, args=(flood_url, stop, answers, lock)) for _ in range(FLOOD_CLIENTS)]
    for client in clients:
        client.start()
    reports = []
    deadline = time.monotonic() + FLOOD_S
    seq = 2
    while time.monotonic() < deadline:
        reports.append(report(seq))
        seq += 1
        time.sleep(0.05)
    stop.set()
    for client in clients:
        client.join(60)
    assert len(reports) >= 10
    return reports, answers


def test_a_flood_past_the_route_share_gets_429_with_retry_after_while_reports_are_answered(servers):
    # A small share, so that the flood passes it surely on any machine; the default (0.25) is measured in
    # bench/README.md ("Issue 30").
    server = servers(roles="proxy", env={"FLEETWATCH_ROUTE_SHARE": "0.05"}).start()
    reports, answers = reports_under_a_flood(server, server.url)

    assert set(reports) == {(200, (("ok", True),))}
    statuses = {status for status, _, _ in answers}
    assert statuses <= {200, 429}, answers
    refused = {wait for (status, wait, error), n in answers.items() if status == 429 and error == "route_busy"}
    assert refused and refused <= {"1", "2", "3"}, answers  # refused past the share, saying when to ask again
    assert sum(n for (status, _, _), n in answers.items() if status == 200) > 0, answers  # and still answered


def niceness_of_servers_on(port):
    """The niceness of every granian process (its main process and workers) started for ``port``."""
    found = {}
    for process in psutil.process_iter(["cmdline"]):
        argv = process.info["cmdline"] or []
        if any(arg.endswith("granian") for arg in argv) and "--port" in argv \
                and argv[argv.index("--port") + 1:][:1] == [str(port)]:
            with contextlib.suppress(psutil.Error):
                found[process.pid] = process.nice()
    return found


def test_the_route_listener_answers_a_flood_in_processes_of_its_own_at_a_lower_priority(servers):
    route_port = free_port()
    # The same small share on the web port: the route listener's processes have no write lane, so no gate.
    server = servers(roles="proxy", env={"FLEETWATCH_ROUTE_SHARE": "0.05",
                                         "FLEETWATCH_ROUTE_PORT": str(route_port)}).start()
    route_url = server.route_url
    said = f"routers (placement, feedback): {route_url}"
    deadline = time.monotonic() + 60  # up says it once every process has started
    while said not in server.log_path.read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert said in server.log_path.read_text()
    reports, answers = reports_under_a_flood(server, route_url)

    assert set(reports) == {(200, (("ok", True),))}
    assert set(answers) == {(200, None, None)}, answers  # every placement answered, none refused
    assert sum(answers.values()) >= FLOOD_CLIENTS
    route, web = niceness_of_servers_on(route_port), niceness_of_servers_on(server.port)
    assert len(route) >= 2 and set(route.values()) == {10}, route  # granian and its worker, under nice -n 10
    assert len(web) >= 3 and set(web.values()) == {0}, web
    autogroup = f"/proc/{min(route)}/autogroup"
    if os.path.exists(autogroup):  # a kernel with autogroups: the session's niceness is what it weighs
        with open(autogroup) as group:
            assert group.read().split()[-2:] == ["nice", "10"]

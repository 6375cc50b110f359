"""A routing flood against ``up`` is refused past the route lane's share while the agents' reports are answered
(issue 30, item 2): on the real web server (granian, two processes), on the suite's database."""

import threading
import time
from collections import Counter

import pytest
import requests

from tests.factories import make_engine, make_snapshot

pytestmark = pytest.mark.live

FLOOD_CLIENTS = 48
FLOOD_S = 4.0


def flood(url, stop, answers, lock):
    """Ask placement again as soon as answered (a router that ignores Retry-After), until ``stop``."""
    session = requests.Session()
    while not stop.is_set():
        response = session.post(url + "/v1/placement", json={"model": "tiny"}, timeout=30)
        body = response.json()
        with lock:
            answers[(response.status_code, response.headers.get("Retry-After"), body.get("error"))] += 1


def test_a_flood_past_the_route_share_gets_429_with_retry_after_while_reports_are_answered(servers):
    # A small share, so that the flood passes it surely on any machine; the default (0.5) is measured in
    # bench/README.md ("Issue 30").
    server = servers(roles="proxy", env={"FLEETWATCH_ROUTE_SHARE": "0.05"}).start()
    reporter = requests.Session()
    reporter.post(server.url + "/v1/instance/register", json={"instance_id": "i-1", "host": "10.0.0.1",
                                                              "port": 8000}, timeout=30).raise_for_status()

    def report(seq):
        snapshot = make_snapshot(engines=[make_engine(scraped_at_ms=int(time.time() * 1000))])
        started = time.monotonic()
        response = reporter.post(server.url + "/v1/instance/resource_snapshot", timeout=30, json={
            "instance_id": "i-1", "snapshot": snapshot, "metadata": {"report_seq": seq}})
        return response.status_code, response.json(), time.monotonic() - started

    assert report(1)[:2] == (200, {"ok": True})
    stop, lock, answers = threading.Event(), threading.Lock(), Counter()
    clients = [threading.Thread(target=flood, args=(server.url, stop, answers, lock)) for _ in range(FLOOD_CLIENTS)]
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

    assert {(status, tuple(body.items())) for status, body, _ in reports} == {(200, (("ok", True),))}
    assert len(reports) >= 10
    statuses = {status for status, _, _ in answers}
    assert statuses <= {200, 429}, answers
    refused = {wait for (status, wait, error), n in answers.items() if status == 429 and error == "route_busy"}
    assert refused and refused <= {"1", "2", "3"}, answers  # refused past the share, saying when to ask again
    assert sum(n for (status, _, _), n in answers.items() if status == 200) > 0, answers  # and still answered

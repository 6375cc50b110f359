"""Nothing acknowledged is lost: kill -9 of the whole server during a stream of reports (issue 11).

Several reporters send at once, so the reports share commits (the group commit of issue 33): an
acknowledgement still means the report's batch was on disk.
"""

import threading

import pytest
import requests

from tests.factories import make_snapshot
from tests.live import wait_for

pytestmark = pytest.mark.live

INSTANCES = 40
REPORTERS = 4  # at once, each over its own share of the instances: more than one request in flight per worker
# Restarts must not age the instances out of the lists read afterwards.
LIVE_ENV = {"FLEETWATCH_INSTANCE_TTL_S": "3600", "FLEETWATCH_RATE_LIMIT": "0"}


class Reporter(threading.Thread):
    """Posts snapshots round-robin over the instances, report_seq rising; remembers every acknowledgement."""

    def __init__(self, url, share=0, shares=1):
        super().__init__(daemon=True)
        self.url = url
        self.share, self.shares = share, shares
        self.acknowledged = {}  # instance_id -> highest report_seq answered {"ok": true}
        self.count = 0
        self.stop = threading.Event()

    def run(self):
        session = requests.Session()
        seq = 0
        while not self.stop.is_set():
            seq += 1
            instance_id = f"i-{(seq * self.shares + self.share) % INSTANCES}"
            body = {"instance_id": instance_id, "snapshot": make_snapshot(cpu=float(seq % 100)),
                    "metadata": {"report_seq": seq}}
            try:
                response = session.post(self.url + "/v1/instance/resource_snapshot", json=body, timeout=5)
            except requests.RequestException:
                continue  # the server is gone: nothing was acknowledged
            if response.status_code == 200 and response.json() == {"ok": True}:
                self.acknowledged[instance_id] = seq
                self.count += 1


@pytest.mark.parametrize("round_trips", [2])
def test_it_keeps_every_acknowledged_report_across_kill_9(servers, round_trips):
    server = servers(roles="proxy", env=LIVE_ENV).start()
    for n in range(INSTANCES):
        assert server.post("/v1/instance/register", {"instance_id": f"i-{n}", "host": "10.0.0.1", "port": 9000 + n}).ok
    acknowledged = {}
    for _ in range(round_trips):
        reporters = [Reporter(server.url, share, REPORTERS) for share in range(REPORTERS)]
        for reporter in reporters:
            reporter.start()
        wait_for(lambda: sum(r.count for r in reporters) >= 300, timeout_s=120,
                 message="a stream of acknowledged reports")
        server.kill_everything()
        for reporter in reporters:
            reporter.stop.set()
            reporter.join(30)
            acknowledged.update(reporter.acknowledged)
        server.start()
        stored = {row["instance_id"]: row["resource"]["report_seq"] for row in server.get("/v1/instance/list")}
        lost = {i: (seq, stored.get(i)) for i, seq in acknowledged.items() if (stored.get(i) or 0) < seq}
        assert lost == {}, f"acknowledged but not stored: {lost}"
    assert len(acknowledged) == INSTANCES


def test_it_has_no_locked_database_with_many_concurrent_writers(servers):
    server = servers(roles="proxy", env=LIVE_ENV).start()
    for n in range(INSTANCES):
        assert server.post("/v1/instance/register", {"instance_id": f"i-{n}", "host": "10.0.0.1", "port": 9000 + n}).ok
    failures, done = [], []

    def writer(number):
        session = requests.Session()
        for seq in range(1, 61):
            instance_id = f"i-{(number * 7 + seq) % INSTANCES}"
            path = "/v1/instance/resource_snapshot" if seq % 5 else "/v1/instance/heartbeat"
            body = ({"instance_id": instance_id, "snapshot": make_snapshot(), "metadata": {"report_seq": seq}}
                    if seq % 5 else {"instance_id": instance_id, "inflight": seq})
            response = session.post(server.url + path, json=body, timeout=30)
            if response.status_code != 200:
                failures.append((response.status_code, response.text[:200]))
        done.append(number)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert len(done) == 32
    assert failures == []
    assert "database is locked" not in server.log_since(0)

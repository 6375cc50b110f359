"""Registers, reports and unregisters of the same ids from several clients at once never answer 500 (issue 20).

Found by bench/faults.py's fuzz on PostgreSQL, whose read-committed
transactions let them interleave: a register that found its id taken and
then the entry gone (unregistered in between) answered 500 with
``DoesNotExist``, and an unregister that deleted an instance while a report
for it was being stored answered 500 with a foreign-key violation.
"""

import threading

import pytest
import requests

from tests.factories import make_snapshot

pytestmark = pytest.mark.live

CLIENTS = 4
ROUNDS = 150
IDS = ("race-1", "race-2")


def test_it_answers_every_register_and_unregister_racing_for_the_same_ids(servers):
    server = servers(roles="proxy,scheduler", env={"FLEETWATCH_RATE_LIMIT": "0"}).start()
    statuses = []

    def client(number):
        session = requests.Session()
        for round_ in range(ROUNDS):
            instance_id = IDS[(number + round_) % len(IDS)]
            for path, body in (("/v1/instance/register", {"instance_id": instance_id, "host": "10.0.0.1", "port": 1}),
                               ("/v1/instance/resource_snapshot", {"instance_id": instance_id,
                                                                   "snapshot": make_snapshot()}),
                               ("/v1/instance/unregister", {"instance_id": instance_id}),
                               ("/v1/proxy/register", {"proxy_id": instance_id, "host": "10.0.0.2", "port": 2}),
                               ("/v1/proxy/unregister", {"proxy_id": instance_id})):
                statuses.append(session.post(server.url + path, json=body, timeout=30).status_code)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert len(statuses) == CLIENTS * ROUNDS * 5
    assert set(statuses) == {200}, {status: statuses.count(status) for status in set(statuses)}


def test_concurrent_resets_of_a_new_engine_are_all_applied(servers):
    """Eight resets at once of a new engine of a registered instance, in rounds: each is applied. On PostgreSQL all
    but the first create of the engine's stream lost the race on ``prefix_engine_once`` and were answered
    ``unknown_instance``, and the agent then drops its registration (issue 47)."""
    server = servers(roles="proxy", env={"FLEETWATCH_RATE_LIMIT": "0"}).start()
    assert server.post("/v1/instance/register", {"instance_id": "i-1", "host": "10.0.0.1", "port": 1}).ok
    senders, rounds, answers = 8, 6, []

    def send(engine, epoch, barrier):
        body = {"instance_id": "i-1", "engine": engine, "epoch": epoch, "seq": 0, "block_tokens": 16,
                "reset": True, "added": [epoch]}
        with requests.Session() as session:
            session.get(server.url + "/healthz", timeout=30)  # connected before the barrier
            barrier.wait()
            answer = session.post(server.url + "/v1/instance/prefix_blocks", json=body, timeout=30)
        answers.append((answer.status_code, answer.json()))

    for round_ in range(rounds):
        barrier = threading.Barrier(senders)
        threads = [threading.Thread(target=send, args=(f"http://127.0.0.1:{9000 + round_}", n, barrier))
                   for n in range(senders)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert answers == [(200, {"ok": True, "resync": False})] * (senders * rounds)

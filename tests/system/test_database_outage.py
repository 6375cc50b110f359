"""A database outage is a 503 ``database_unavailable`` until the database is back, then all is as before (issue 20).

The outage is real for the server: on PostgreSQL its connections go through
a TCP relay (``tests/outages.py``) that the test cuts, dropping every
connection and refusing new ones, then restores; on SQLite the database file
is moved aside and a directory put in its place, with connections opened
per request, then moved back. The server is never restarted. Every process
of ``up`` says once that the database is away and once that it is back,
without a traceback, and none dies (issue 30).
"""

import concurrent.futures
import re

import pytest
import requests

from tests.factories import make_snapshot
from tests.live import wait_for
from tests.outages import outage_on_suite_backend
from tests.system.test_keep_alive import PADDED, REGISTER, ROUNDS, SNAPSHOT, UNKNOWN_TOKEN, kept_alive_rounds

pytestmark = pytest.mark.live

LIVE_ENV = {"FLEETWATCH_INSTANCE_TTL_S": "3600", "FLEETWATCH_RATE_LIMIT": "0"}
REFUSED = 30  # requests answered during the outage


@pytest.fixture
def outage(tmp_path):
    outage = outage_on_suite_backend(tmp_path)
    yield outage
    outage.close()


def report(server, seq):
    body = {"instance_id": "o-1", "snapshot": make_snapshot(cpu=float(seq)), "metadata": {"report_seq": seq}}
    return requests.post(server.url + "/v1/instance/resource_snapshot", json=body, timeout=30)


# Each process of up says what it does while the database is away (controlplane/db_outage.py).
WAITS = {
    "web": "answering 503 database_unavailable until it is back",
    "link": "the scheduler link waits until it is back",
    "recorder": "the recorder writes no series until it is back",
    "tasks": "the task cluster runs no task until it is back",
}
OUTAGE_LINE = re.compile(r" WARNING fleetwatch\.database\[(\d+)\]: database (unavailable \(.+\): (.+)|reachable again)")


def outage_lines(text):
    """``{pid: [what each outage line of that process says]}``: its consequence, or "back"."""
    lines = {}
    for match in OUTAGE_LINE.finditer(text):
        lines.setdefault(match[1], []).append(match[3] or "back")
    return lines


def test_it_answers_503_through_an_outage_and_recovers_without_a_restart(servers, outage):
    server = servers(roles="proxy", database=outage.database, env={**LIVE_ENV, **outage.env}).start()
    assert server.post("/v1/instance/register", {"instance_id": "o-1", "host": "10.0.0.1", "port": 9000}).ok
    assert report(server, 1).json() == {"ok": True}

    outage.cut()
    answers = []
    for seq in range(2, 2 + REFUSED):
        response = report(server, seq) if seq % 2 else requests.get(server.url + "/v1/instance/list", timeout=30)
        answers.append((response.status_code, response.json(), response.headers.get("Retry-After")))
    assert answers == [(503, {"ok": False, "error": "database_unavailable"}, "5")] * REFUSED
    assert requests.get(server.url + "/healthz", timeout=10).status_code == 200

    outage.restore()
    wait_for(lambda: report(server, 100).status_code == 200, timeout_s=60, message="reports accepted again")
    rows = server.get("/v1/instance/list")
    assert [(row["instance_id"], row["resource"]["report_seq"]) for row in rows] == [("o-1", 100)]
    assert server.running()

    log = server.log_path.read_text(errors="replace")
    assert "Internal Server Error" not in log and "Traceback" not in log, log
    # Once per web process (two), not once per refused request.
    web = [said for said in outage_lines(log).values() if said[0] == WAITS["web"]]
    assert 1 <= len(web) <= 2 and all(said[1:] in ([], ["back"]) for said in web), web
    assert ["back"] in [said[1:] for said in web], web  # the one that answered the 200 at least


def test_reports_sent_at_once_through_an_outage_are_each_a_503_and_none_is_lost_after(servers, outage):
    # Reports in flight together share a commit (issue 33): the batch that meets the outage refuses each
    # of its reports with the API's 503, never a 500, and after it every acknowledged report is stored.
    server = servers(roles="proxy", database=outage.database, env={**LIVE_ENV, **outage.env}).start()
    assert server.post("/v1/instance/register", {"instance_id": "o-1", "host": "10.0.0.1", "port": 9000}).ok
    outage.cut()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        refused = list(pool.map(lambda seq: report(server, seq), range(2, 2 + REFUSED)))
    assert [(r.status_code, r.json(), r.headers.get("Retry-After")) for r in refused] == [
        (503, {"ok": False, "error": "database_unavailable"}, "5")] * REFUSED
    outage.restore()
    wait_for(lambda: report(server, 100).status_code == 200, timeout_s=60, message="reports accepted again")
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        accepted = list(pool.map(lambda seq: report(server, seq), range(101, 101 + REFUSED)))
    assert all(r.status_code == 200 and r.json()["ok"] for r in accepted)
    assert [row["resource"]["report_seq"] for row in server.get("/v1/instance/list")] == [100 + REFUSED]
    log = server.log_path.read_text(errors="replace")
    assert "Internal Server Error" not in log and "Traceback" not in log, log


@pytest.mark.parametrize("path", [SNAPSHOT, REGISTER], ids=["hot lane", "django"])
def test_a_keep_alive_client_loses_no_request_after_an_outage_503(servers, outage, path):
    # The token is looked up before the body is read: in an outage that lookup is the 503 (issue 30).
    server = servers(roles="proxy", database=outage.database, env={**LIVE_ENV, **outage.env}).start()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {UNKNOWN_TOKEN}"}
    outage.cut()
    answers = kept_alive_rounds(server.port, "POST", path, headers, PADDED)
    outage.restore()
    assert answers == [503, 200] * ROUNDS


def through_an_outage(server, outage):
    """Cut the database, wait until every process of ``up`` has said so, restore it, wait until each has said
    it is back; everything logged meanwhile."""
    start = server.log_path.stat().st_size

    def since_start():
        return server.log_path.read_bytes()[start:].decode(errors="replace")

    def said_away():
        told = {lines[0] for lines in outage_lines(since_start()).values()}
        return set(WAITS.values()) <= told

    outage.cut()
    wait_for(lambda: report(server, 2).status_code == 503 and said_away(), timeout_s=90,
             message="every process to find the database away")
    outage.restore()
    wait_for(lambda: report(server, 3).status_code == 200 and all(
        lines[-1] == "back" for lines in outage_lines(since_start()).values()), timeout_s=120,
        message="every process to find it back")
    return since_start()


def assert_each_said_it_once(text):
    assert "Traceback" not in text and "CRITICAL" not in text, text
    lines = outage_lines(text)
    assert all(said[1:] == ["back"] and said[0] in WAITS.values() for said in lines.values()), lines
    told = sorted(said[0] for said in lines.values())
    for kind in ("link", "recorder"):
        assert told.count(WAITS[kind]) == 1, told
    assert 1 <= told.count(WAITS["web"]) <= 2 and told.count(WAITS["tasks"]) >= 1, told


# Both roles, so the link runs too; it heartbeats every second, the recorder ticks every second.
EVERY_PROCESS = {"roles": "proxy,scheduler", "env": {**LIVE_ENV, "FLEETWATCH_PROXY_HEARTBEAT_S": "1"}}


def test_every_process_says_once_that_the_database_is_away_and_once_that_it_is_back(servers, outage):
    server = servers(database=outage.database, **{**EVERY_PROCESS, "env": {**EVERY_PROCESS["env"], **outage.env}})
    server.start()
    wait_for(lambda: requests.get(server.url + "/readyz", timeout=10).status_code == 200, timeout_s=90,
             message="the recorder and the link at work")
    assert_each_said_it_once(through_an_outage(server, outage))
    assert server.running()


def test_an_outage_as_up_starts_its_processes_ends_none_of_them(servers, outage):
    # Once up says it is up (it needs the database until then: migrations, its processes' tokens), its task
    # cluster, recorder and link are still starting. An outage then ended the cluster's sentinel (its broker asked
    # for a connection as it was made) and the singletons' lock on PostgreSQL, and up with them.
    server = servers(database=outage.database, **{**EVERY_PROCESS, "env": {**EVERY_PROCESS["env"], **outage.env}})
    server.start()
    wait_for(lambda: "Fleetwatch is up" in server.log(), timeout_s=90, interval_s=0.02, message="up to be up")
    assert_each_said_it_once(through_an_outage(server, outage))
    assert server.running()

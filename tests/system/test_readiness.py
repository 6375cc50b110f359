"""/readyz of a running ``up`` while its PostgreSQL goes away and comes back, and ``up --no-migrate``.

The database sits behind a TCP relay (``tests/tcp_relay.py``) that the test
kills and starts again on the same port: the web processes' connections are
cut and new ones refused, as when a database host fails. This test always
runs on PostgreSQL (the suite's server, ``FLEETWATCH_TEST_PG_URL``, on both
runs of ``./fw test``): an outage of a SQLite file is not a thing.
"""

import os
import subprocess
import sys
from urllib.parse import urlparse, urlunparse

import pytest
import requests

from tests.live import ROOT, LiveDatabase, wait_for
from tests.migration_graph import newest_and_parent
from tests.outages import Relay

pytestmark = pytest.mark.live
PG_URL = os.environ.get("FLEETWATCH_TEST_PG_URL", "postgres://postgres@127.0.0.1:5432/fleetwatch")


@pytest.fixture
def relayed_database(tmp_path, monkeypatch):
    """A fresh PostgreSQL database and a relay in front of it; the database's URL points at the relay."""
    monkeypatch.setenv("DATABASE_URL", PG_URL)
    database = LiveDatabase(tmp_path)
    direct = urlparse(database.url)
    relay = Relay(direct.hostname, direct.port or 5432).start()
    database.url = urlunparse(direct._replace(netloc=f"{direct.username}@127.0.0.1:{relay.port}"))
    yield database, relay
    relay.stop()
    database.drop()


def readyz(server):
    response = requests.get(server.url + "/readyz", timeout=10)
    return response.status_code, response.json()


def test_it_answers_503_while_the_database_is_down_and_200_after(servers, relayed_database):
    database, relay = relayed_database
    server = servers(roles="scheduler", database=database).start()
    assert wait_for(lambda: readyz(server)[0] == 200, message="ready")
    # up migrated the fresh database, a line per migration as it ran.
    assert "Applying scheduler_app.0001_initial... OK" in server.log_since(0)

    relay.stop()
    status, body = wait_for(lambda: (answer := readyz(server))[0] == 503 and answer, message="503 without the database")
    assert body["ok"] is False and body["failed"] == ["database"]
    assert body["checks"]["database"]["error"]
    assert requests.get(server.url + "/healthz", timeout=10).status_code == 200  # the process still runs

    relay.start()
    status, body = wait_for(lambda: (answer := readyz(server))[0] == 200 and answer, message="ready again")
    assert body["failed"] == [] and body["checks"]["migrations"]["unapplied"] == []


def manage(database, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DJANGO_SETTINGS"))}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**env, "DATABASE_URL": database.url}, timeout=300)


def test_up_no_migrate_leaves_migrating_to_its_own_step(servers, relayed_database):
    database, _ = relayed_database
    assert manage(database, "migrate", "--verbosity", "0").returncode == 0
    newest, parent = newest_and_parent("scheduler_app")
    assert manage(database, "migrate", "scheduler_app", parent, "--verbosity", "0").returncode == 0
    server = servers(roles="scheduler", database=database)
    server.argv = lambda original=server.argv: [*original(), "--no-migrate"]
    server.start()
    status, body = readyz(server)
    assert status == 503 and body["checks"]["migrations"]["unapplied"] == [f"scheduler_app.{newest}"]
    assert "--no-migrate: 1 migration(s) not applied" in server.log_since(0)

    migrated = manage(database, "migrate")
    assert f"Applying scheduler_app.{newest}... OK" in migrated.stdout
    status, body = readyz(server)
    assert status == 200 and body["failed"] == []

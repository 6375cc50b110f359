"""Database outages that are real for a server: ``cut()`` puts its database out of reach, ``restore()`` back.

``PostgresOutage``: the server reaches PostgreSQL through a TCP relay
(``tests/tcp_relay.py``) in a process of its own; cutting kills it, so the
server's connections break and new ones are refused, as when a database
host goes away. ``SqliteOutage``: the database file is moved
aside. Each gives the ``database`` (a ``LiveDatabase``) and the ``env`` to
start a ``LiveServer`` with.
"""

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

from tests.live import ROOT, LiveDatabase, free_port


class Relay:
    """``tests/tcp_relay.py`` in a process of its own, from 127.0.0.1:``port`` to ``target``: killed to cut
    every connection at once and refuse new ones, started again on the same port to bring them back."""

    def __init__(self, target_host, target_port):
        self.target = (target_host, target_port)
        self.port = free_port()
        self.process = None

    def start(self):
        self.process = subprocess.Popen([sys.executable, "-m", "tests.tcp_relay", str(self.port), self.target[0],
                                         str(self.target[1])], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout.readline().startswith("relaying"), "the relay did not start"
        return self

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


class PostgresOutage:
    def __init__(self, tmp_path):
        self.database = LiveDatabase(tmp_path)
        parsed = urlparse(self.database.url)
        self.relay = Relay(parsed.hostname, parsed.port or 5432).start()
        self.env = {"DATABASE_URL": parsed._replace(netloc=f"{parsed.username}@127.0.0.1:{self.relay.port}").geturl()}

    def cut(self):
        self.relay.stop()

    def restore(self):
        self.relay.start()

    def close(self):
        self.relay.stop()


class SqliteOutage:
    """The database file (and its WAL) moved aside and a directory put in its place: it cannot
    be opened, and nothing can create an empty database there meanwhile."""

    FILES = ("", "-wal", "-shm")

    def __init__(self, tmp_path):
        self.database = LiveDatabase(tmp_path)
        # A connection per request, so every request finds the file gone, as a new worker would.
        self.env = {"FLEETWATCH_CONN_MAX_AGE": "0"}

    def cut(self):
        for suffix in self.FILES:
            Path(f"{self.database.path}{suffix}").rename(f"{self.database.path}{suffix}.aside")
        while True:
            try:
                self.database.path.mkdir()
                return
            except FileExistsError:  # a process opened the path in between, creating an empty database there
                for suffix in self.FILES:
                    Path(f"{self.database.path}{suffix}").unlink(missing_ok=True)

    def restore(self):
        self.database.path.rmdir()
        for suffix in self.FILES:
            Path(f"{self.database.path}{suffix}.aside").rename(f"{self.database.path}{suffix}")

    def close(self):
        pass


def outage_on_suite_backend(tmp_path):
    """The outage of the backend the suite runs on (``DATABASE_URL``, as ``LiveDatabase`` reads it)."""
    on_postgres = os.environ.get("DATABASE_URL", "").startswith("postgres")
    return (PostgresOutage if on_postgres else SqliteOutage)(tmp_path)

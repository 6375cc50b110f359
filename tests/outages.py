"""Database outages that are real for a server: ``cut()`` puts its database out of reach, ``restore()`` back.

``PostgresOutage``: the server reaches PostgreSQL through ``TcpProxy``, a
TCP forwarder; cutting it closes every forwarded connection and stops
listening, so the server's connections break and new ones are refused, as
when a database host goes away. ``SqliteOutage``: the database file is moved
aside. Each gives the ``database`` (a ``LiveDatabase``) and the ``env`` to
start a ``LiveServer`` with.
"""

import os
import socket
import threading
from pathlib import Path
from urllib.parse import urlparse

from tests.live import LiveDatabase


class TcpProxy:
    """Forwards connections to 127.0.0.1:``port`` on to ``target``, until cut."""

    def __init__(self, target_host, target_port):
        self.target = (target_host, target_port)
        self.port = None
        self.listener = None
        self.sockets = []
        self.lock = threading.Lock()

    def start(self):
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port or 0))
        listener.listen(128)
        listener.settimeout(0.2)
        self.port = listener.getsockname()[1]
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def _accept(self, listener):
        while self.listener is listener:
            try:
                client, _ = listener.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            with self.lock:
                self.sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    @staticmethod
    def _pump(source, sink):
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        listener, self.listener = self.listener, None
        listener.close()
        with self.lock:
            sockets, self.sockets = self.sockets, []
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    restore = start


class PostgresOutage:
    def __init__(self, tmp_path):
        self.database = LiveDatabase(tmp_path)
        parsed = urlparse(self.database.url)
        self.forwarder = TcpProxy(parsed.hostname, parsed.port or 5432).start()
        self.env = {"DATABASE_URL": parsed._replace(netloc=f"{parsed.username}@127.0.0.1:{self.forwarder.port}").geturl()}

    def cut(self):
        self.forwarder.cut()

    def restore(self):
        self.forwarder.restore()


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
        self.database.path.mkdir()

    def restore(self):
        self.database.path.rmdir()
        for suffix in self.FILES:
            Path(f"{self.database.path}{suffix}.aside").rename(f"{self.database.path}{suffix}")


def outage_on_suite_backend(tmp_path):
    """The outage of the backend the suite runs on (``DATABASE_URL``, as ``LiveDatabase`` reads it)."""
    on_postgres = os.environ.get("DATABASE_URL", "").startswith("postgres")
    return (PostgresOutage if on_postgres else SqliteOutage)(tmp_path)

"""At most one running copy of a loop per database: the link, the recorder.

Several web processes may serve one pool behind a load balancer, and ``up``
may be started on more than one host against one PostgreSQL database; the
loops that speak for the pool as a whole must still run once. Each takes a
lock named after itself before it starts, and holds it while it runs:

- PostgreSQL: a session advisory lock (``pg_try_advisory_lock``) on a
  connection of its own, so Django closing or recycling its connections can
  never drop it; the server releases it when the process dies.
- SQLite: an exclusive ``flock`` on a file next to the database; the kernel
  releases it when the process dies.

A copy that finds the lock taken stands by and tries again, so a standby
takes over within ``retry_s`` of the holder's death.
"""

import hashlib
import logging
import threading

from django.db import OperationalError, connection

from controlplane.db_outage import DATABASE_UNAVAILABLE

try:
    import fcntl
except ImportError:  # not POSIX: no lock, one copy is the operator's job
    fcntl = None

log = logging.getLogger("fleetwatch.singleton")


def _lock_key(name):
    """A stable signed 64-bit key for ``name`` (advisory locks take a bigint)."""
    return int.from_bytes(hashlib.sha256(f"fleetwatch:{name}".encode()).digest()[:8], "big", signed=True)


class SingletonLock:
    def __init__(self, name):
        self.name = name
        self._handle = None

    def acquire(self):
        """Take the lock if free; True when this process now holds it."""
        if self._handle is not None:
            return True
        if connection.vendor == "postgresql":
            self._handle = self._acquire_postgres()
        elif connection.vendor == "sqlite" and fcntl is not None and not connection.is_in_memory_db():
            self._handle = self._acquire_file()
        else:
            self._handle = True
        return self._handle is not None

    def _acquire_postgres(self):
        import psycopg

        # Django's own connection parameters, less what only Django's driver wrapper understands.
        params = {key: value for key, value in connection.get_connection_params().items()
                  if key not in ("context", "cursor_factory", "prepare_threshold", "server_side_binding")}
        try:
            session = psycopg.connect(**params, autocommit=True)
        except psycopg.OperationalError as exc:  # as Django's own connections raise it
            raise OperationalError(str(exc)) from exc
        held = session.execute("SELECT pg_try_advisory_lock(%s)", [_lock_key(self.name)]).fetchone()[0]
        if held:
            return session
        session.close()
        return None

    def _acquire_file(self):
        handle = open(f"{connection.settings_dict['NAME']}-{self.name}.lock", "a+b")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return None
        return handle

    def release(self):
        if self._handle not in (None, True):
            self._handle.close()  # ends the session, or drops the flock
        self._handle = None


def wait_for_lock(lock, stop, retry_s=5.0, outage=None):
    """Block until ``lock`` is held (True) or ``stop`` (a threading.Event) is set (False).

    Without a database the lock cannot be asked for: the loop's ``outage`` (a ``db_outage.Outage``)
    says so once, and it asks again ``retry_s`` later.
    """
    announced = False
    while not stop.is_set():
        try:
            if lock.acquire():
                if announced:
                    log.info("%s: took over the lock", lock.name)
                return True
            if not announced:
                log.info("%s: another process holds the lock; standing by", lock.name)
                announced = True
        except DATABASE_UNAVAILABLE as exc:
            if outage is not None:
                outage.failed(exc)
        stop.wait(retry_s)
    return False


def stop_event_on_signals():
    """A threading.Event set by SIGTERM or SIGINT: the loops' way to stop cleanly."""
    import signal

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    return stop

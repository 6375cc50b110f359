"""A database outage, as each process of ``up`` says it: one warning when it starts, one line when it ends.

Every process that uses the database (the web processes, the recorder, the
link to the Scheduler, the task cluster's) meets an outage on its own: a
query raises ``OperationalError`` or ``InterfaceError`` (PostgreSQL down or
unreachable, a SQLite file that cannot be opened or stays locked). Each one
keeps running through it, waits in its own way (``consequence``), and logs
it through ``Outage``: the error's first line once, when the outage starts,
and once, when the database answers again, however many of its attempts
failed in between. No traceback: the error is the database's, not the
code's, and its one line says all there is (issue 30).
"""

import logging
import threading
import time

from django.db import InterfaceError, OperationalError

log = logging.getLogger("fleetwatch.database")

DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)


def is_database_unavailable(exc):
    return isinstance(exc, DATABASE_UNAVAILABLE)


def one_line(exc):
    """The first line of an error's message (psycopg's add a hint on a second), else its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class Outage:
    """Whether this process is in an outage, and since when; logs each start and end once.

    ``consequence`` says what the process does meanwhile ("answering 503 … until it is back").
    """

    def __init__(self, consequence, monotonic=time.monotonic):
        self.consequence = consequence
        self.monotonic = monotonic
        self.since = None
        self.lock = threading.Lock()

    def failed(self, exc):
        """The database was found unavailable (``exc``); True when that starts an outage."""
        with self.lock:
            if self.since is not None:
                return False
            self.since = self.monotonic()
        log.warning("database unavailable (%s): %s", one_line(exc), self.consequence)
        return True

    def recovered(self):
        """The database answered; True when that ends an outage."""
        if self.since is None:  # the common case, without the lock
            return False
        with self.lock:
            if self.since is None:
                return False
            lasted_s, self.since = self.monotonic() - self.since, None
        log.warning("database reachable again after %.1f s", lasted_s)
        return True

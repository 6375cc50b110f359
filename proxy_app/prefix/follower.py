"""A daemon thread per web process that keeps a copy up to date off the request path (``proxy_app.prefix.keeper``).

It calls ``step()`` every ``interval_s`` seconds (read on each round, so a
changed setting takes effect) until ``stop()``; requests never wait for it.
A failed step is tried again next round, and its connection closed; a
database outage is logged as every process of ``up`` logs one
(``controlplane.db_outage``: a line when it starts, one when it ends), any
other failure with its traceback; the thread's database connections are handled as a
request's are (``close_old_connections`` each round: an obsolete or broken
one is closed) and closed when the thread ends. It is started lazily by the
first request that needs it (``ensure_running``): after a fork, or if it
died, the next request starts another. Tests call ``step()`` themselves, or
start a thread and ``stop()`` it.
"""

import logging
import os
import threading

from django.db import close_old_connections, connections

from controlplane.db_outage import Outage, is_database_unavailable

log = logging.getLogger(__name__)
OUTAGE = Outage("the prefix index copy stays as it was until it is back")


class Follower:
    def __init__(self, name, step, interval_s):
        self.name, self.step, self.interval_s = name, step, interval_s
        self._thread = None
        self._stopping = threading.Event()
        self._guard = threading.Lock()

    def running(self):
        thread = self._thread
        return thread is not None and thread.is_alive() and thread.pid == os.getpid()

    def ensure_running(self):
        """Start the thread unless it runs in this process."""
        if self.running():
            return
        with self._guard:
            if self.running():
                return
            self._stopping = threading.Event()
            thread = threading.Thread(target=self._run, args=(self._stopping,), name=self.name, daemon=True)
            thread.pid = os.getpid()
            self._thread = thread
            thread.start()

    def stop(self, timeout_s=10.0):
        """End the thread (after the step it is in) and wait for it."""
        with self._guard:
            thread, self._thread = self._thread, None
            self._stopping.set()
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            thread.join(timeout_s)

    def _run(self, stopping):
        try:
            while not stopping.wait(self.interval_s()):
                close_old_connections()
                try:
                    self.step()
                    OUTAGE.recovered()
                except Exception as exc:  # the next round tries again; a request meanwhile answers from the copy it has
                    if is_database_unavailable(exc):
                        OUTAGE.failed(exc)
                    else:
                        log.exception("%s: a step failed", self.name)
                    connections.close_all()
        finally:
            connections.close_all()  # this thread's own: Django keeps a connection per thread

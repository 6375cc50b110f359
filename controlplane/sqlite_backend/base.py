"""SQLite with a fair queue for writers.

SQLite admits one writer at a time. A second writer that finds the lock
taken is put to sleep by SQLite's busy handler for 1, 2, 5, 10… ms before it
looks again, although the lock is held for a fraction of a millisecond; with
several gunicorn workers ingesting snapshots, that polling cost as much as
the writes themselves. Here every write transaction (Django's
``BEGIN IMMEDIATE``) first takes an exclusive ``flock`` on a file next to the
database, so waiting writers queue in the kernel and wake the moment the
previous one commits. Writes outside a transaction (single autocommit
statements) still rely on SQLite's busy timeout.

The database holds sessions and token hashes: a new file is created mode
0600 (its WAL and shared-memory files take the same mode from it), like the
secret key beside it.
"""

try:
    import fcntl
except ImportError:  # not POSIX: SQLite's own busy handling only
    fcntl = None

import contextlib
import functools
import os

from django.db.backends.sqlite3 import base


@functools.lru_cache(maxsize=512)
def _qmark(query):
    return base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")


def _run(db, sql, params):
    """One statement on a Django cursor of ``db``, answering its row count (``write_transaction``'s ``run``)."""
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


class CursorWrapper(base.SQLiteCursorWrapper):
    """Django's cursor, with the %s → ? rewrite remembered per statement.

    The same few statements run for every snapshot; rewriting them with a
    regex each time was a measurable share of the ingest path.
    """

    def convert_query(self, query, *, param_names=None):
        if param_names is None:
            return _qmark(query)
        return super().convert_query(query, param_names=param_names)


def create_private(path):
    """Create an empty database file readable by its owner only, unless there is one already."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError:  # it exists, or cannot be made: SQLite opens it, or says why it cannot
        pass


class DatabaseWrapper(base.DatabaseWrapper):
    _write_lock_file = None

    def get_new_connection(self, conn_params):
        if not self.is_in_memory_db():
            create_private(self.settings_dict["NAME"])
        return super().get_new_connection(conn_params)

    def create_cursor(self, name=None):
        return self.connection.cursor(factory=CursorWrapper)

    def _write_lock(self):
        if fcntl is None or self.is_in_memory_db():
            return None
        if self._write_lock_file is None:
            self._write_lock_file = open(f"{self.settings_dict['NAME']}-writelock", "a+b")
        return self._write_lock_file

    def _release_write_lock(self):
        if self._write_lock_file is not None:
            fcntl.flock(self._write_lock_file, fcntl.LOCK_UN)

    def _start_transaction_under_autocommit(self):
        lock = self._write_lock()
        if lock is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._release_write_lock()
            raise

    @contextlib.contextmanager
    def write_transaction(self):
        """``BEGIN IMMEDIATE`` … ``COMMIT`` (or ``ROLLBACK`` on an error) around a few statements, through the
        writer queue, without ``atomic``'s savepoint and hook bookkeeping: the snapshot hot path's transaction.

        Yields ``run(sql, params)``, which executes one statement (``%s`` placeholders, a list of
        parameters) and answers its row count. The statements go to the driver's cursor, their ``?`` form
        rewritten once per statement, when nothing watches them: Django's cursor wrapping, its error
        checks and its regex cost more than the statements' own Python work. An ``execute_wrapper`` or
        the query log (``DEBUG``, a test's query count) sees them through Django's cursor instead; inside
        a transaction already (a group commit's ``atomic``, a test's), they join it. Errors are Django's either way.
        """
        if self.in_atomic_block or not self.get_autocommit():
            # Inside a transaction already (a group commit's batch, a test's): its statements join it.
            yield functools.partial(_run, self) if self._watched() else self._run_unwatched
            return
        if self._watched():
            self.ensure_connection()
            self._start_transaction_under_autocommit()
            run = functools.partial(_run, self)
        else:
            self._begin_unwatched()
            run = self._run_unwatched
        try:
            yield run
        except BaseException:
            if self.connection.in_transaction:
                self._rollback()
            else:
                self._release_write_lock()
            raise
        self._commit()

    def execute_unwatched(self, sql, params):
        """One statement in autocommit, its own transaction, answering its row count: ``write_transaction``'s
        ``run`` without ``BEGIN`` and ``COMMIT`` (a heartbeat's contact UPDATE), or one statement of the
        transaction open. Straight to the driver when nothing watches, as there; else through Django's cursor."""
        if self._watched():
            return _run(self, sql, params)
        if self.in_atomic_block or not self.get_autocommit():  # a transaction is open: the connection is
            return self._run_unwatched(sql, params)
        self._ready_unwatched()
        return self._run_unwatched(sql, params)

    def _watched(self):
        """Whether something sees each statement: an ``execute_wrapper`` or the query log."""
        return bool(self.execute_wrappers) or self.queries_logged

    def _ready_unwatched(self):
        """What ``cursor()`` checks before a statement: the health check, the connection, the thread."""
        self.close_if_health_check_failed()
        self.ensure_connection()
        self.validate_thread_sharing()

    def _begin_unwatched(self):
        """``_start_transaction_under_autocommit`` straight on the driver's connection: what ``cursor()``
        checks first, the writer queue, then ``BEGIN``."""
        self._ready_unwatched()
        lock = self._write_lock()
        if lock is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with self.wrap_database_errors:
                self.connection.execute(f"BEGIN {self.transaction_mode}")
        except BaseException:
            self._release_write_lock()
            raise

    def _run_unwatched(self, sql, params):
        with self.wrap_database_errors:
            return self.connection.execute(_qmark(sql), params).rowcount

    def _commit(self):
        try:
            super()._commit()
        finally:
            self._release_write_lock()

    def _rollback(self):
        try:
            super()._rollback()
        finally:
            self._release_write_lock()

    def _close(self):
        try:
            super()._close()
        finally:
            if self._write_lock_file is not None:
                self._write_lock_file.close()  # closing releases the flock too
                self._write_lock_file = None

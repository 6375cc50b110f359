"""Group commit: the reports a web process receives together share one transaction (issue 33).

A report (a snapshot, a heartbeat, an unregister) is a few statements; its
commit cost as much as they did (SQLite's WAL append and lock hand-over,
PostgreSQL's WAL flush and round trips). With several requests in flight per
process (granian's blocking threads, ``controlplane.ops.up``), each request
hands its report's database work to ``GroupCommit.commit`` and waits:

1. The first to arrive while no commit is running becomes the **leader**: it
   takes everything queued (itself first, at most ``MAX_BATCH``) and runs it,
   on its own thread and connection, in one ``transaction.atomic()``: one
   ``BEGIN IMMEDIATE … COMMIT`` on SQLite, one ``BEGIN … COMMIT`` on PostgreSQL.
2. Whoever arrives while that commit runs queues and sleeps (a **follower**).
3. When the commit returns, the leader wakes the first follower still queued as
   the next leader, then gives each report of its batch its own outcome: a
   request is answered only after the commit that holds its report, so an
   acknowledgement still means on disk.

There is no timer: an idle server's report leads its own batch at once (no
added wait), and under load a report waits at most for the commit in progress
and then its own. Each report's work is the very code a lone report runs (its
``report_seq`` guard, its contact UPDATE, its status changes), in arrival order.

**One bad report fails no other.** When the batch raises (a row the database
refuses, or its commit does), the transaction is rolled back and each of its
reports runs again alone, each in its own ``atomic()``: the bad one gets its
error, the others are stored. A batch that PostgreSQL rolled back because it met
another process's batch (a deadlock: the two locked the same instances in
opposite orders) is run one by one the same way, each report once more if it
meets one again. An unavailable database (``DATABASE_UNAVAILABLE``) is not
retried: every report not yet stored gets that error, which the API answers
503 with ``Retry-After`` (``controlplane.api.outage``).
"""

import threading

from django.db import transaction

from controlplane.db_outage import is_database_unavailable

# The most reports one transaction holds; a process has fewer requests in flight than this.
MAX_BATCH = 256


class Report:
    """One request's work and, once its batch is done, its outcome (``result`` or ``error``)."""

    __slots__ = ("work", "result", "error", "woken", "leads")

    def __init__(self, work):
        self.work = work
        self.result = self.error = None
        self.woken = threading.Event()
        self.leads = False  # woken to lead the next batch, not with an outcome

    def outcome(self):
        if self.error is not None:
            raise self.error
        return self.result


class GroupCommit:
    """A process's queue of reports waiting for a commit, and whether one is running (see the module)."""

    def __init__(self, max_batch=MAX_BATCH):
        self.max_batch = max_batch
        self._lock = threading.Lock()
        self._queue = []
        self._committing = False
        self.batches = 0  # figures for the tests and the benchmark: batches run, reports in them
        self.reports = 0

    def commit(self, work):
        """``work()``'s answer once the transaction that ran it has committed; raises what it (or that
        commit) raised. ``work`` runs the report's statements on whichever thread leads its batch."""
        report = Report(work)
        with self._lock:
            self._queue.append(report)
            leads = not self._committing
            self._committing = True
        if not leads:
            report.woken.wait()
            if not report.leads:
                return report.outcome()
        self._lead()
        return report.outcome()

    def _lead(self):
        """Run everything queued (the leader first) in one transaction, hand the lead on, then wake the batch."""
        with self._lock:
            batch = self._queue[:self.max_batch]
            del self._queue[:self.max_batch]
        try:
            run_batch(batch)
        except BaseException as exc:  # an interpreter exit: no follower may wait for ever
            for report in batch:
                if report.error is None and report.result is None:
                    report.error = exc
            raise
        finally:
            with self._lock:
                self.batches += 1
                self.reports += len(batch)
                if self._queue:
                    successor = self._queue[0]
                    successor.leads = True
                    successor.woken.set()
                else:
                    self._committing = False
            for report in batch[1:]:
                report.woken.set()


# PostgreSQL's answers to transactions that met each other (deadlock_detected, serialization_failure): two
# batches of two processes may lock the same instances' rows in opposite orders. Nothing is wrong with the reports.
CONFLICTS = frozenset({"40P01", "40001"})


def is_conflict(exc):
    """Whether the database rolled the transaction back because another one held what it needed."""
    return getattr(exc.__cause__, "sqlstate", None) in CONFLICTS


def run_alone(report):
    """One report in a transaction of its own (``atomic``, or the lone report's own statements), run once more
    if another transaction's locks made the database roll it back."""
    for attempt in (1, 2):
        try:
            with transaction.atomic():
                report.result = report.work()
            report.error = None
            return
        except Exception as exc:
            report.error = exc
            if attempt == 2 or not is_conflict(exc):
                return


def run_batch(batch):
    """Each report's work in one transaction, its answer in ``result``; on an error, each alone (the module).

    A batch of one (an idle server) runs its work as a lone request always did, in the transactions of
    its own (a heartbeat's one autocommit UPDATE): no ``atomic()`` to pay for when there is nothing to share."""
    if len(batch) == 1:
        try:
            batch[0].result = batch[0].work()
        except Exception as exc:
            if is_conflict(exc):
                run_alone(batch[0])
            else:
                batch[0].error = exc
        return
    try:
        with transaction.atomic():
            results = [report.work() for report in batch]
    except Exception as exc:
        if is_database_unavailable(exc) and not is_conflict(exc):
            for report in batch:
                report.error = exc
            return
        run_one_by_one(batch)
        return
    for report, result in zip(batch, results):
        report.result = result


def run_one_by_one(batch):
    """Each report in its own transaction, after a batch that failed: only the bad one fails."""
    for index, report in enumerate(batch):
        run_alone(report)
        if report.error is not None and is_database_unavailable(report.error) and not is_conflict(report.error):
            for rest in batch[index + 1:]:
                rest.error = report.error
            return


# The web process's one queue: every hot write's report goes through it.
REPORTS = GroupCommit()

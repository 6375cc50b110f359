"""A board kept per web process from the database: what both roles' placements (SPEC 14) and the
Proxy's pool summary (SPEC 5) share.

A placement answer must not walk the registry, so each web process keeps
one board (a columnar set of candidates, ``proxy_app.placement.decision.CandidateBoard`` or
``scheduler_app.placement.PoolBoard``, each on ``controlplane.endpoints.slots``), kept by a
``PlacementKeeper``, which refreshes it at most every
``FLEETWATCH_PLACEMENT_REFRESH_S`` (0.25 s): it reads only the entries whose
row changed since its last read (``changed_q``, with an overlap of
``OVERLAP_S`` for writes committed late) and drops those unregistered or
expired since. Every ``FULL_EVERY_S`` it reads them all afresh, so nothing
an incremental read could miss lives longer. A refresh setting of 0 reads
everything on every request.

An answer therefore reflects reports at most the refresh interval plus a
query's time older than the newest it could have seen. A ``BoardKeeper`` that is not
``throttled`` (the pool summary's, ``proxy_app.pool.columns``) reads the
changed rows on every request instead, so it shows every report committed
before the request.
"""

import threading

from django.conf import settings
from django.db.models import Q

from controlplane.endpoints.liveness import ChangeStatus

# Reports are stamped when they arrive and committed a few milliseconds later; half a second covers a
# writer that waited for the lock, and the full read every FULL_EVERY_S covers anything slower. Every
# reader that follows rows by their stamp (the boards, the fence tick) reads this far back.
OVERLAP_S = 0.5
FULL_EVERY_S = 30.0


class BoardKeeper:
    """Keeps this process's copy of a registry's rows (its ``board``) fresh from the database.

    A subclass names the ``model``, the ``fields`` read and the board: ``new_board(capacity)`` and
    ``fill(board, rows, old_board)`` (put the rows on it); ``read``, ``key_of`` and ``changed_rows`` say how
    rows are read where a role reads them otherwise than as dicts of ``fields``.
    """

    model = None
    fields = ()
    # A throttled board reads at most every FLEETWATCH_PLACEMENT_REFRESH_S; one that is not reads the
    # changed rows on every request (the pool summary's, which must show every committed report).
    throttled = True

    def __init__(self):
        self._lock = threading.Lock()
        self.reset()

    def reset(self):
        self.board = self.new_board(64)
        self.read_at = None
        self.full_at = None

    def new_board(self, capacity):
        raise NotImplementedError

    def fill(self, board, rows, old_board):
        """Put the rows on ``board`` (``old_board``: what this process held before)."""
        raise NotImplementedError

    def read(self, queryset):
        """The rows of ``fields`` that ``queryset`` selects (dicts, unless a role reads them otherwise)."""
        return list(queryset.values(*self.fields))

    def key_of(self, row):
        return row[self.model._meta.pk.name]

    def changed_q(self, since):
        return Q(last_seen_at__gt=since)

    def changed_rows(self, since):
        """The rows of ``fields`` that changed after ``since``."""
        return self.read(self.model.objects.filter(self.changed_q(since)).order_by())

    def _refresh(self, now):
        """Bring the board up to date for ``now`` (the caller holds the lock)."""
        refresh_s = settings.FLEETWATCH_PLACEMENT_REFRESH_S
        if self.throttled and self.read_at is not None and refresh_s > 0 and 0 <= now - self.read_at < refresh_s:
            return
        if refresh_s <= 0 or self.full_at is None or not 0 <= now - self.full_at < FULL_EVERY_S:
            self._read_all()
            self.full_at = now
        else:
            self._read_changed(self.read_at - OVERLAP_S)
        self.read_at = now

    def _read_all(self):
        old = self.board
        rows = self.read(self.model.objects.order_by())
        board = self.new_board(max(64, len(rows)))
        self.fill(board, rows, old)
        self.board = board

    def _read_changed(self, since):
        pk = self.model._meta.pk.name
        rows = self.changed_rows(since)
        seen = {self.key_of(row) for row in rows}
        self.fill(self.board, rows, self.board)
        changes = self.model.status_change_model.objects
        ended = set(changes.filter(at__gt=since, new_status__in=(ChangeStatus.UNREGISTERED, ChangeStatus.EXPIRED))
                    .values_list(pk, flat=True)) - seen
        if ended:
            back = set(self.model.objects.filter(pk__in=ended).values_list(pk, flat=True))
            for key in ended - back:
                self.board.remove(key)


class PlacementKeeper(BoardKeeper):
    """A keeper whose board decides placements (SPEC 14): ``candidate_of(row, old_board)`` makes each row's
    candidate and ``policy()`` the decision's settings; with ``counts_placed`` the first candidate of an answer
    counts as placed there (the Proxy's instances, until their next report)."""

    counts_placed = False

    def candidate_of(self, row, old_board):
        raise NotImplementedError

    def policy(self):
        raise NotImplementedError

    def fill(self, board, rows, old_board):
        for row in rows:
            board.put(self.candidate_of(row, old_board))

    def decide(self, request, now, dry_run=False, **asked):
        """The board's decision for ``request``; unless ``dry_run`` (a page showing it), the first
        candidate counts as placed. ``asked``: what else the role's board decides with."""
        with self._lock:
            self._refresh(now)
            decision = self.board.decide(request, self.policy(), now, **asked)
            if self.counts_placed and decision.answered and not dry_run:
                self.board.placed(decision.answered[0].candidate.key)
        return decision

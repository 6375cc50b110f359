"""Fencing against the database (SPEC 14.2): ``proxy_app.placement.fencing``'s state machine, kept on the Instance row.

Two writers move a fence, both through ``_store``, which claims the row with a
conditional update (only onto the fence state it read; a writer that lost the
race reads again), as every periodic job of the project claims its rows:

- ``feedback``: a router's word on a request it sent (``POST
  /v1/placement/feedback``), in the request itself; an ``ok`` outcome and an
  unknown instance write nothing beyond resetting a count;
- ``FenceSweeper.sweep``: fencing's own tick (run every second by the
  recorder's loop, ``proxy_app.ops.history.run_recorder``, and by hand with
  ``manage.py sweep_fences``) reads the reports received since its last tick
  that fencing cares about (trouble, a fenced instance's clean report) and
  lets quiet fences down.

Each fence and unfence writes a status-change row with its reason and
stamps ``fence_changed_at``, which placement boards refresh on. Between a
report that shows trouble and the next tick, ``effective_fence`` already
keeps the instance out: a fence "at once" does not wait for the tick (and a
report marks ``had_ok_engine`` itself, ``proxy_app.ingest.sql``).
"""

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q

from controlplane.endpoints import liveness
from controlplane.endpoints.boards import OVERLAP_S
from controlplane.endpoints.liveness import ChangeStatus
from proxy_app.models import Instance
from proxy_app.placement import fencing

STATE_FIELDS = ("fenced", "fence_reason", "fence_errors", "fence_quiet_since", "had_ok_engine")
READ_FIELDS = ("instance_id", "last_seen_at", *STATE_FIELDS)
# How often a writer reads again after another moved the fence between its read and its claim.
CLAIM_TRIES = 5


def policy():
    return fencing.FencePolicy(errors=settings.FLEETWATCH_FENCE_ERRORS,
                               recovery_s=settings.FLEETWATCH_FENCE_RECOVERY_S)


def _state(row):
    return fencing.FenceState(fenced=row["fenced"], reason=row["fence_reason"], errors=row["fence_errors"],
                              quiet_since=row["fence_quiet_since"], had_ok_engine=row["had_ok_engine"])


def _status_before(row, at):
    """What the instance was when its fence went up: its status at that moment, from its last contact."""
    return liveness.status_at(row["last_seen_at"], at, Instance.ttl_s(), Instance.heartbeat_interval_s())


def _store(row, state, change, now):
    """Store ``state`` (and the status-change row of ``change``) onto the fence ``row`` was read with.

    True when stored or nothing changed; False when another writer moved the fence since ``row`` was read.
    """
    if state == _state(row):
        return True
    fields = {"fenced": state.fenced, "fence_reason": state.reason, "fence_errors": state.errors,
              "fence_quiet_since": state.quiet_since, "had_ok_engine": state.had_ok_engine}
    if change is not None:
        fields["fence_changed_at"] = now
    instance_id = row["instance_id"]
    with transaction.atomic():
        if not Instance.objects.filter(pk=instance_id, **{name: row[name] for name in STATE_FIELDS}).update(**fields):
            return False
        if change is not None and change.fenced:
            Instance.record_change(instance_id, _status_before(row, change.at), ChangeStatus.FENCED, change.reason,
                                   change.at)
        elif change is not None:
            Instance.record_change(instance_id, ChangeStatus.FENCED, ChangeStatus.UNFENCED, change.reason, change.at)
    return True


def feedback(instance_id, outcome, now):
    """Apply a router's outcome; ``None`` for an unknown instance, else whether it is fenced now."""
    if outcome == "ok":
        # Most feedback: one read, and a write only when errors were being counted (on SQLite even an UPDATE
        # that matches no row takes the writer lock, which every report waits for).
        row = Instance.objects.filter(pk=instance_id).values_list("fenced", "fence_errors").first()
        if row is None:
            return None
        if row[1]:
            Instance.objects.filter(pk=instance_id).exclude(fence_errors=0).update(fence_errors=0)
        return row[0]
    for _ in range(CLAIM_TRIES):
        row = Instance.objects.filter(pk=instance_id).values(*READ_FIELDS).first()
        if row is None:
            return None  # read only: an unknown id never takes a write lock
        state, change = fencing.on_feedback(_state(row), outcome, now, policy())
        if _store(row, state, change, now):
            return state.fenced
    return Instance.objects.filter(pk=instance_id).values_list("fenced", flat=True).first()


def report_health(engine_count, engine_ok_count, engine_status, gpu_error_count):
    """What fencing reads of a stored resource row."""
    return fencing.ReportHealth(engine_count=engine_count or 0, engine_ok=bool(engine_ok_count),
                                worst_engine_status=engine_status, gpu_error=bool(gpu_error_count))


def effective_fence(fenced, fence_reason, had_ok_engine, engine_count, engine_ok_count, engine_status,
                    gpu_error_count):
    """``(fenced, reason)`` as placement, list rows and pages show it: the stored fence, or the
    trouble of a report the fence tick has not swept yet (an engine down after it was up, a GPU error)."""
    if fenced:
        return True, fence_reason
    trouble = fencing.report_trouble(report_health(engine_count, engine_ok_count, engine_status, gpu_error_count))
    if fencing.fences_at_once(trouble, had_ok_engine):
        return True, trouble
    return False, None


def fence_of(instance):
    """``effective_fence`` of an ``Instance`` read with its resource row (the pages, the admin)."""
    resource = instance.latest_resource
    figures = (resource.engine_count, resource.engine_ok_count, resource.engine_status, resource.gpu_error_count) \
        if resource is not None else (None, None, None, None)
    return effective_fence(instance.fenced, instance.fence_reason, instance.had_ok_engine, *figures)


def effective_fence_q():
    """``effective_fence`` as a filter on Instance rows: the pool page's "fenced" filter
    (``tests/pages/test_fence_marks.py`` checks that the two agree)."""
    no_ok_engine = Q(resource__engine_ok_count=0) | Q(resource__engine_ok_count__isnull=True)
    return (Q(fenced=True) | Q(resource__gpu_error_count__gt=0)
            | (Q(had_ok_engine=True, resource__engine_count__gt=0) & no_ok_engine))


SWEPT_FIELDS = (*READ_FIELDS, "resource__resource_reported_at", "resource__engine_count",
                "resource__engine_ok_count", "resource__engine_status", "resource__gpu_error_count")


class FenceSweeper:
    """Fencing's tick: where the next sweep starts reading is this sweeper's own (a fresh one, as a
    restarted recorder or ``manage.py sweep_fences`` has, looks back twice the recovery time)."""

    def __init__(self):
        self.swept_until = None

    def sweep(self, now):
        """Reports since the last tick that move a fence, then quiet fences; returns the changes made."""
        since = self.swept_until
        if since is None:
            since = now - 2 * settings.FLEETWATCH_FENCE_RECOVERY_S
        reported = Q(resource__resource_reported_at__gt=since) & (
            Q(fenced=True) | Q(resource__gpu_error_count__gt=0)
            | Q(resource__engine_count__gt=0, resource__engine_ok_count=0)
        )
        rows = list(Instance.objects.filter(reported | Q(fenced=True)).values(*SWEPT_FIELDS))
        changes = 0
        rules = policy()
        for row in rows:
            at = row["resource__resource_reported_at"]
            state = _state(row)
            change = None
            if at is not None and at > since:
                health = report_health(row["resource__engine_count"], row["resource__engine_ok_count"],
                                       row["resource__engine_status"], row["resource__gpu_error_count"])
                state, change = fencing.on_report(state, health, at, rules)
            if change is None:
                state, change = fencing.on_tick(state, now, rules)
            # Feedback may have moved the fence since the read: the claim then fails and the next tick
            # reads the row again.
            changes += _store(row, state, change, now) and change is not None
        self.swept_until = now - OVERLAP_S
        return changes




def count_cached_tokens(instance_id, cached, predicted):
    """Add a router's ``cached_tokens`` and ``predicted_cached_tokens`` (SPEC 16.4) to the instance's totals; a
    figure not sent adds nothing, and feedback without either writes nothing."""
    added = {field: F(field) + value for field, value in (("cached_tokens_total", cached),
                                                           ("predicted_cached_tokens_total", predicted))
             if value}
    if added:
        Instance.objects.filter(pk=instance_id).update(**added)

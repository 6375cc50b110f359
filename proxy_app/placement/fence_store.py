"""Fencing against the database (SPEC 14.2): ``proxy_app.placement.fencing``'s state machine, kept on the Instance row.

Two writers move a fence, both through ``_apply``:

- ``feedback``: a router's word on a request it sent (``POST
  /v1/placement/feedback``), in the request itself;
- ``sweep``: the recorder's tick (``proxy_app.ops.history.record``) reads the
  reports received since its last tick that fencing cares about (trouble,
  a fenced instance's clean report, a first ok engine) and lets quiet
  fences down.

Each fence and unfence writes a status-change row with its reason and
stamps ``fence_changed_at``, which placement boards refresh on. Between a
report that shows trouble and the next tick, ``effective_fence`` already
keeps the instance out: a fence "at once" does not wait for the recorder.
"""

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from controlplane.endpoints.liveness import ChangeStatus
from proxy_app.models import Instance
from proxy_app.placement import fencing

STATE_FIELDS = ("fenced", "fence_reason", "fence_errors", "fence_quiet_since", "had_ok_engine", "status")
# A sweep reads the reports of the last OVERLAP_S seconds before its previous tick too: a
# report is stamped when it arrives and committed a moment later. Reading one twice changes nothing.
OVERLAP_S = 1.0
# Per process: where the next sweep starts reading (None: not swept yet).
_swept_until = {"t": None}


def policy():
    return fencing.FencePolicy(errors=settings.FLEETWATCH_FENCE_ERRORS,
                               recovery_s=settings.FLEETWATCH_FENCE_RECOVERY_S)


def _state(row):
    return fencing.FenceState(fenced=row["fenced"], reason=row["fence_reason"], errors=row["fence_errors"],
                              quiet_since=row["fence_quiet_since"], had_ok_engine=row["had_ok_engine"])


def _apply(instance_id, row, state, change, now):
    """Store ``state`` (and the status-change row of ``change``) if it differs from ``row``'s."""
    if state == _state(row):
        return
    fields = {"fenced": state.fenced, "fence_reason": state.reason, "fence_errors": state.errors,
              "fence_quiet_since": state.quiet_since, "had_ok_engine": state.had_ok_engine}
    if change is not None:
        fields["fence_changed_at"] = now
        if change.fenced:
            Instance.record_change(instance_id, row["status"], ChangeStatus.FENCED, change.reason, change.at)
        else:
            Instance.record_change(instance_id, ChangeStatus.FENCED, ChangeStatus.UNFENCED, change.reason, change.at)
    Instance.objects.filter(pk=instance_id).update(**fields)


def feedback(instance_id, outcome, now):
    """Apply a router's outcome; ``None`` for an unknown instance, else whether it is fenced now."""
    if outcome == "ok":
        # Most feedback: no transaction, and no write unless errors were being counted.
        Instance.objects.filter(pk=instance_id).exclude(fence_errors=0).update(fence_errors=0)
        return Instance.objects.filter(pk=instance_id).values_list("fenced", flat=True).first()
    with transaction.atomic():
        row = Instance.objects.select_for_update().filter(pk=instance_id).values(*STATE_FIELDS).first()
        if row is None:
            return None
        state, change = fencing.on_feedback(_state(row), outcome, now, policy())
        _apply(instance_id, row, state, change, now)
    return state.fenced


def report_health(engine_count, engine_ok_count, engine_status, gpu_error_count):
    """What fencing reads of a stored resource row."""
    return fencing.ReportHealth(engine_count=engine_count or 0, engine_ok=bool(engine_ok_count),
                                worst_engine_status=engine_status, gpu_error=bool(gpu_error_count))


def effective_fence(fenced, fence_reason, had_ok_engine, engine_count, engine_ok_count, engine_status,
                    gpu_error_count):
    """``(fenced, reason)`` as placement, list rows and pages show it: the stored fence, or the
    trouble of a report the recorder has not swept yet (an engine down after it was up, a GPU error)."""
    if fenced:
        return True, fence_reason
    health = report_health(engine_count, engine_ok_count, engine_status, gpu_error_count)
    trouble = fencing.report_trouble(health)
    if trouble is not None and (trouble == "gpu_error" or had_ok_engine):
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


SWEPT_FIELDS = (*STATE_FIELDS, "instance_id", "resource__resource_reported_at", "resource__engine_count",
                "resource__engine_ok_count", "resource__engine_status", "resource__gpu_error_count")


def sweep(now):
    """One tick: reports since the last tick that move a fence, then quiet fences; returns the changes made."""
    since = _swept_until["t"]
    if since is None:
        since = now - 2 * settings.FLEETWATCH_FENCE_RECOVERY_S
    reported = Q(resource__resource_reported_at__gt=since) & (
        Q(fenced=True) | Q(resource__gpu_error_count__gt=0)
        | Q(resource__engine_count__gt=0, resource__engine_ok_count=0)
        | Q(had_ok_engine=False, resource__engine_ok_count__gt=0)
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
        with transaction.atomic():
            # Feedback may have moved the fence since the read: apply only onto the row as it was.
            if Instance.objects.select_for_update().filter(
                    pk=row["instance_id"], **{name: row[name] for name in STATE_FIELDS[:5]}).exists():
                _apply(row["instance_id"], row, state, change, now)
                changes += change is not None
    _swept_until["t"] = now - OVERLAP_S
    return changes


def forget_sweeps():
    """Tests: start the next sweep as a fresh recorder would."""
    _swept_until["t"] = None


"""Fencing (SPEC 14.2): when an instance is kept out of placement, and when it is let back. Pure.

An instance's fence is a small state (``FenceState``) that three events move:
a router's feedback on a request it sent there (``on_feedback``), a report
of the instance's health (``on_report``) and time passing (``on_tick``).
Each returns the new state and, when the fence went up or down, the change
to record (``FenceChange``). Steps:

1. Fenced at once when a report shows a GPU whose health is ``error``
   (reason ``gpu_error``), or no ``ok`` engine while it had one (reason
   ``engine_<worst status>``).
2. Fenced after ``errors`` (3) consecutive non-``ok`` feedback outcomes
   (reason ``router_<last outcome>``); an ``ok`` outcome resets the count.
3. Let back after ``recovery_s`` (10 s) of quiet: since the last trouble
   report and the last error outcome, every report was clean. One good
   report does not readmit it (hysteresis). A fence from feedback starts
   its quiet at once, so an instance that sends no snapshots (an old
   client) is let back by time alone if no router complains.
"""

import dataclasses

ERROR_OUTCOMES = ("error", "timeout", "refused")
OUTCOMES = ("ok", *ERROR_OUTCOMES)


@dataclasses.dataclass(frozen=True)
class FencePolicy:
    errors: int = 3
    recovery_s: float = 10.0


@dataclasses.dataclass(frozen=True)
class FenceState:
    fenced: bool = False
    reason: str | None = None
    errors: int = 0  # consecutive non-ok outcomes
    quiet_since: float | None = None  # while fenced: since when nothing went wrong
    had_ok_engine: bool = False


@dataclasses.dataclass(frozen=True)
class ReportHealth:
    """What a report says that fencing reads."""

    engine_count: int = 0
    engine_ok: bool = False  # some engine has status ok
    worst_engine_status: str | None = None
    gpu_error: bool = False


@dataclasses.dataclass(frozen=True)
class FenceChange:
    fenced: bool
    reason: str
    at: float


def _fence(state, reason, now, quiet_since=None):
    return (dataclasses.replace(state, fenced=True, reason=reason, quiet_since=quiet_since),
            FenceChange(True, reason, now))


def _maybe_unfence(state, now, policy):
    if state.fenced and state.quiet_since is not None and now - state.quiet_since >= policy.recovery_s:
        return (dataclasses.replace(state, fenced=False, reason=None, errors=0, quiet_since=None),
                FenceChange(False, f"recovered_after_{policy.recovery_s:g}s", now))
    return state, None


def on_feedback(state, outcome, now, policy):
    """A router says how a request it sent to this instance went."""
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown outcome {outcome!r}")
    if outcome == "ok":
        return dataclasses.replace(state, errors=0), None
    state = dataclasses.replace(state, errors=state.errors + 1)
    if state.fenced:
        return dataclasses.replace(state, quiet_since=now), None  # recovery starts again from now
    if state.errors >= policy.errors:
        return _fence(state, f"router_{outcome}", now, quiet_since=now)
    return state, None


def report_trouble(health):
    """The reason a report fences its instance, or None when it is clean (ignoring what it had)."""
    if health.gpu_error:
        return "gpu_error"
    if health.engine_count and not health.engine_ok:
        return f"engine_{health.worst_engine_status or 'down'}"
    return None


def fences_at_once(trouble, had_ok_engine):
    """Whether a report's ``trouble`` (``report_trouble``) fences its instance at once (step 1): a GPU error
    always, an engine down only when the instance had an ok one (an engine that never came up is kept out by
    its admission state already)."""
    return trouble is not None and (trouble == "gpu_error" or had_ok_engine)


def on_report(state, health, now, policy):
    """A report of the instance's health arrived."""
    trouble = report_trouble(health)
    state = dataclasses.replace(state, had_ok_engine=state.had_ok_engine or health.engine_ok)
    if trouble is not None:
        if state.fenced:
            return dataclasses.replace(state, quiet_since=None), None
        if fences_at_once(trouble, state.had_ok_engine):
            return _fence(state, trouble, now)
        return state, None
    if state.fenced and state.quiet_since is None:
        state = dataclasses.replace(state, quiet_since=now)
    return _maybe_unfence(state, now, policy)


def on_tick(state, now, policy):
    """Time passed without news: a quiet fence may come down."""
    return _maybe_unfence(state, now, policy)

"""Fencing (SPEC 14.2) as a pure state machine: feedback, reports and time move it. No database, no clock."""

import pytest

from proxy_app.placement.fencing import FencePolicy, FenceState, ReportHealth, on_feedback, on_report, on_tick

POLICY = FencePolicy(errors=3, recovery_s=10.0)
CLEAN = ReportHealth(engine_count=1, engine_ok=True, worst_engine_status="ok")
ENGINE_DOWN = ReportHealth(engine_count=1, engine_ok=False, worst_engine_status="unreachable")
GPU_ERROR = ReportHealth(engine_count=1, engine_ok=True, worst_engine_status="ok", gpu_error=True)


def run(events, state=FenceState()):
    """Apply ``(now, kind, value)`` events; return the final state and the changes recorded."""
    changes = []
    for now, kind, value in events:
        if kind == "feedback":
            state, change = on_feedback(state, value, now, POLICY)
        elif kind == "report":
            state, change = on_report(state, value, now, POLICY)
        else:
            state, change = on_tick(state, now, POLICY)
        if change is not None:
            changes.append((change.at, change.fenced, change.reason))
    return state, changes


def test_it_fences_after_three_consecutive_error_outcomes():
    state, changes = run([(1, "feedback", "error"), (2, "feedback", "timeout"), (3, "feedback", "refused")])
    assert state.fenced and state.reason == "router_refused"
    assert changes == [(3, True, "router_refused")]


def test_it_forgets_errors_after_an_ok_outcome():
    state, changes = run([(1, "feedback", "error"), (2, "feedback", "error"), (3, "feedback", "ok"),
                          (4, "feedback", "error"), (5, "feedback", "error")])
    assert not state.fenced and changes == [] and state.errors == 2


def test_it_fences_at_once_when_the_engine_it_had_goes_down():
    state, changes = run([(1, "report", CLEAN), (2, "report", ENGINE_DOWN)])
    assert changes == [(2, True, "engine_unreachable")]


def test_it_does_not_fence_an_engine_that_never_came_up():
    state, changes = run([(1, "report", ENGINE_DOWN), (2, "report", ENGINE_DOWN)])
    assert not state.fenced and changes == []


def test_it_fences_at_once_on_a_gpu_error():
    assert run([(1, "report", GPU_ERROR)])[1] == [(1, True, "gpu_error")]


def test_it_lets_back_only_after_ten_quiet_seconds_of_clean_reports():
    state, changes = run([(1, "report", CLEAN), (2, "report", ENGINE_DOWN), (3, "report", CLEAN),
                          (12, "report", CLEAN)])
    assert state.fenced, "one good report (or nine seconds of them) does not readmit it"
    state, changes = run([(13, "report", CLEAN)], state)
    assert not state.fenced and changes == [(13, False, "recovered_after_10s")]


def test_it_starts_the_quiet_again_after_a_trouble_report():
    state, _ = run([(1, "report", CLEAN), (2, "report", ENGINE_DOWN), (3, "report", CLEAN),
                    (8, "report", ENGINE_DOWN), (9, "report", CLEAN), (18, "report", CLEAN)])
    assert state.fenced
    assert not run([(19, "report", CLEAN)], state)[0].fenced


def test_it_starts_the_quiet_again_after_an_error_outcome_while_fenced():
    state, _ = run([(1, "report", GPU_ERROR), (2, "report", CLEAN), (8, "feedback", "timeout"),
                    (12, "report", CLEAN), (17, "tick", None)])
    assert state.fenced
    assert not run([(18, "tick", None)], state)[0].fenced


def test_it_lets_a_router_fenced_instance_without_snapshots_back_by_time():
    state, changes = run([(1, "feedback", "error"), (2, "feedback", "error"), (3, "feedback", "error"),
                          (12.9, "tick", None), (13, "tick", None)])
    assert not state.fenced
    assert changes == [(3, True, "router_error"), (13, False, "recovered_after_10s")]
    assert state.errors == 0


def test_it_refuses_an_unknown_outcome():
    with pytest.raises(ValueError):
        on_feedback(FenceState(), "meh", 1, POLICY)

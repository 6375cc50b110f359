"""A ``CandidateBoard`` kept across reports, placements and removals decides as a board built afresh from the same
state: its per-slot pressures and ranking keys (derived as each slot changes) are never stale."""

import dataclasses

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from proxy_app.placement.decision import CandidateBoard
from proxy_app.placement.derived import FEW_SLOTS
from proxy_app.placement.inputs import Request
from tests.proxy.test_placement_decision import NOW, POLICY, instance, order

STEPS = st.lists(st.tuples(st.sampled_from(["report", "place", "remove", "decide", "other-policy"]),
                           st.integers(0, 5), st.integers(0, 12), st.floats(0, 1)), min_size=1, max_size=40)
OTHER_POLICY = dataclasses.replace(POLICY, waiting_scale=2.0, kv_scale=0.5)


def answer(board, policy=POLICY):
    decision = board.decide(Request(count=6), policy, NOW)
    return decision.verdict, order(decision), [(item.pressure, item.reasons) for item in decision.ranked]


@given(STEPS)
def test_a_board_kept_across_changes_decides_as_a_new_one(steps):
    board, latest, placed = CandidateBoard(capacity=2), {}, {}
    for n, (step, which, waiting, kv) in enumerate(steps):
        instance_id = f"i-{which}"
        if step == "report" or (step == "place" and instance_id not in latest):
            # Each report newer than the last: the instance's pending count starts again.
            latest[instance_id] = instance(instance_id, requests_waiting=waiting, kv_cache_usage_ratio=kv,
                                           requests_running=waiting % 3, reported_at=NOW - 1 + n * 1e-3)
            placed[instance_id] = 0
            board.put(latest[instance_id])
        elif step == "place":
            board.placed(instance_id)
            placed[instance_id] += 1
        elif step == "remove":
            board.remove(instance_id)
            latest.pop(instance_id, None)
        elif step == "other-policy":
            board.decide(Request(), OTHER_POLICY, NOW)
        else:
            board.decide(Request(), POLICY, NOW)
    fresh = CandidateBoard()
    for instance_id, candidate in latest.items():
        fresh.put(candidate)
        for _ in range(placed[instance_id]):
            fresh.placed(instance_id)
    assert answer(board) == answer(fresh)
    assert answer(board, OTHER_POLICY) == answer(fresh, OTHER_POLICY)


SLOT = st.tuples(st.booleans(), st.one_of(st.none(), st.integers(0, 10**6)),
                 st.one_of(st.none(), st.floats(0, 1)), st.one_of(st.none(), st.floats(0, 100)),
                 st.integers(0, 5000), st.integers(0, 40))


@given(st.lists(SLOT, min_size=1, max_size=FEW_SLOTS), st.floats(0.01, 1000), st.floats(0.01, 10))
@example([(True, 1, None, None, 0, 0), (True, 5, None, None, 0, 0)], 400_000.0, 0.8)  # 2.5 and 12.5 millionths
def test_a_few_slots_derived_one_by_one_match_the_vector_form(slots, waiting_scale, kv_scale):
    """A board derives a few slots due one by one in plain floats and many as numpy's vectors: the
    pressures (both), whether the queue sets them and the ranking key come out the same, bit for bit."""
    policy = dataclasses.replace(POLICY, waiting_scale=waiting_scale, kv_scale=kv_scale)
    one_by_one, vectors = CandidateBoard(), CandidateBoard()
    for n, (engine_ok, waiting, kv, gpu_util, running, placed) in enumerate(slots):
        candidate = instance(f"i-{n}", engine_ok=engine_ok, requests_waiting=waiting, kv_cache_usage_ratio=kv,
                             gpu_util=gpu_util, requests_running=running)
        for board in (one_by_one, vectors):
            board.put(candidate)
            for _ in range(placed):
                board.placed(candidate.instance_id)
    one_by_one._scales = (waiting_scale, kv_scale)  # the policy seen before: only the slots due are derived
    one_by_one._derive(policy)
    vectors._derive(policy)  # a policy not seen before: every slot, as vectors
    for name in ("pressure", "reported_pressure", "from_queue", "rank"):
        ours, theirs = (board.columns.live(name) for board in (one_by_one, vectors))
        assert np.array_equal(ours, theirs, equal_nan=True), name

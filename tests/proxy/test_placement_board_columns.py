"""A ``CandidateBoard`` kept across reports, placements and removals decides as a board built afresh from the same
state: its per-slot pressures and ranking keys (derived as each slot changes) are never stale."""

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from proxy_app.placement.decision import CandidateBoard
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

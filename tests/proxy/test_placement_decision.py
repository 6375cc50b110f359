"""The placement decision (SPEC 14.1) as a pure function: plain candidates in, a ranking and a verdict out.

The worked examples of docs/placement.md are the ones here. No database, no clock.
"""

import collections

import pytest

from controlplane.endpoints.placement import stable_hash
from proxy_app.placement.decision import CandidateBoard, Verdict, decide
from proxy_app.placement.inputs import Candidate, Policy, Request

NOW = 1_767_225_600.0
POLICY = Policy(ttl_s=30, heartbeat_interval_s=10, max_age_s=2.0, waiting_scale=5.0, kv_scale=0.8, shed_pressure=2.0)


def instance(instance_id, **fields):
    """A fresh, alive instance with an ok engine serving ``llama``, idle unless told otherwise."""
    values = dict(host="10.0.0.1", port=8000, last_seen_at=NOW - 0.5, reported_at=NOW - 0.5,
                  admission_state="accepting", models=frozenset({"llama"}), engine_ok=True,
                  requests_waiting=0, requests_running=0, kv_cache_usage_ratio=0.0)
    values.update(fields)
    return Candidate(instance_id, **values)


def order(decision):
    return [item.candidate.instance_id for item in decision.ranked]


def test_it_ranks_by_pressure_the_larger_of_queue_and_kv_cache():
    """docs/placement.md, example 1: waiting 2 of W=5 is 0.4; KV 0.6 of K=0.8 is 0.75; an idle one is 0."""
    decision = decide([
        instance("a", requests_waiting=2, kv_cache_usage_ratio=0.1),
        instance("b", requests_waiting=0, kv_cache_usage_ratio=0.6),
        instance("c"),
    ], Request(), POLICY, NOW)
    assert order(decision) == ["c", "a", "b"]
    assert [item.pressure for item in decision.ranked] == [0.0, 0.4, 0.75]
    assert decision.ranked[2].reasons == ("pressure_from_kv_cache",)
    assert (decision.verdict, decision.reason, decision.verdict.http_status) == (Verdict.ACCEPT, "lowest_pressure", 200)


def test_it_ranks_instances_without_an_engine_signal_after_those_with_one():
    decision = decide([
        instance("gpu-only", engine_ok=False, requests_waiting=None, kv_cache_usage_ratio=None, gpu_util=5.0),
        instance("busy", requests_waiting=4),
        instance("blind", engine_ok=False, requests_waiting=None, kv_cache_usage_ratio=None, gpu_util=None),
    ], Request(), POLICY, NOW)
    assert order(decision) == ["busy", "gpu-only", "blind"]
    assert [item.pressure for item in decision.ranked] == [0.8, 0.05, None]
    assert decision.ranked[1].reasons == ("pressure_from_gpu_util", "no_engine_signal")


def test_it_breaks_ties_by_running_requests_then_fresher_signal():
    decision = decide([
        instance("older", requests_running=1, reported_at=NOW - 1.5),
        instance("fresher", requests_running=1, reported_at=NOW - 0.2),
        instance("more-running", requests_running=3),
    ], Request(), POLICY, NOW)
    assert order(decision) == ["fresher", "older", "more-running"]
    assert decision.ranked[0].signal_age_s == 0.2


def test_it_gives_the_same_answer_for_the_same_state_and_body():
    candidates = [instance(f"i-{n}") for n in range(20)]
    first = order(decide(candidates, Request(), POLICY, NOW))
    assert first == order(decide(list(reversed(candidates)), Request(), POLICY, NOW))


def test_it_counts_what_this_proxy_placed_since_the_latest_report():
    """Ten equal idle instances: a request placed on one makes the next go elsewhere."""
    decision = decide([instance("a", pending=1), instance("b")], Request(), POLICY, NOW)
    assert order(decision) == ["b", "a"]
    assert decision.ranked[1].pressure == pytest.approx(0.2)


def test_what_this_proxy_placed_orders_the_ranking_but_never_sheds_or_moves_a_session():
    busy_by_us = [instance("a", pending=40), instance("b", pending=30)]
    decision = decide(busy_by_us, Request(session_key="k"), POLICY, NOW)
    assert decision.verdict is Verdict.ACCEPT  # the reports show idle engines
    sticky = decide([instance("a"), instance("b")], Request(session_key="k"), POLICY, NOW).ranked[0]
    assert decision.ranked[0].candidate.instance_id == sticky.candidate.instance_id


@pytest.mark.parametrize("fields, rule", [
    ({"last_seen_at": NOW - 31}, "stale"),
    ({"fenced": True}, "fenced"),
    ({"admission_state": "rejecting"}, "rejecting"),
    ({"gpu_error": True}, "gpu_error"),
    ({"models": frozenset({"mistral"})}, "model"),
])
def test_it_excludes_by_the_first_rule_an_instance_fails(fields, rule):
    decision = decide([instance("bad", **fields), instance("good")], Request(model="llama"), POLICY, NOW)
    assert order(decision) == ["good"]
    assert decision.excluded == {rule: 1}
    assert (decision.considered, decision.eligible) == (2, 1)


def test_it_keeps_suspect_and_degraded_instances_eligible():
    decision = decide([instance("suspect", last_seen_at=NOW - 20, reported_at=NOW - 1),
                       instance("degraded", admission_state="degraded")], Request(), POLICY, NOW)
    assert sorted(order(decision)) == ["degraded", "suspect"]


def test_it_matches_a_model_by_capabilities_or_engine_and_an_adapter_by_either_list():
    candidates = [instance("base", models=frozenset({"llama"})),
                  instance("lora", models=frozenset({"llama"}), adapters=frozenset({"sql-lora"}))]
    assert order(decide(candidates, Request(model="llama", adapter="sql-lora"), POLICY, NOW)) == ["lora"]
    assert decide(candidates, Request(adapter="other"), POLICY, NOW).excluded == {"adapter": 2}


def test_it_leaves_out_what_the_router_excludes():
    decision = decide([instance("a"), instance("b")], Request(exclude=frozenset({"a"})), POLICY, NOW)
    assert order(decision) == ["b"] and decision.excluded == {"excluded": 1}


def test_it_prefers_fresh_signals_and_counts_the_stale_ones_out():
    decision = decide([instance("fresh", requests_waiting=4), instance("old", reported_at=NOW - 2.5)],
                      Request(), POLICY, NOW)
    assert order(decision) == ["fresh"]
    assert decision.excluded == {"signal_stale": 1}


def test_it_fails_open_to_stale_signals_rather_than_going_dark():
    """docs/placement.md, example 3: every report is 5 s old (the agents lost their Proxy for a while)."""
    decision = decide([instance("a", reported_at=NOW - 5), instance("b", reported_at=None)], Request(), POLICY, NOW)
    assert order(decision) == ["a", "b"]
    assert (decision.verdict, decision.reason, decision.excluded) == (Verdict.ACCEPT, "fail_open_stale", {})
    assert "signal_stale" in decision.ranked[0].reasons


def test_it_is_unavailable_when_nothing_is_eligible():
    decision = decide([instance("a", fenced=True)], Request(), POLICY, NOW)
    assert (decision.verdict, decision.reason, decision.verdict.http_status) == (
        Verdict.UNAVAILABLE, "no_eligible_instance", 503)
    assert decision.answered == []
    assert decide([], Request(), POLICY, NOW).verdict is Verdict.UNAVAILABLE


def test_it_queues_when_every_eligible_instance_is_saturated():
    """docs/placement.md, example 2: waiting 6 (1.2) and KV 0.9 (1.125): saturated, not yet shedding."""
    decision = decide([instance("a", requests_waiting=6), instance("b", kv_cache_usage_ratio=0.9)],
                      Request(), POLICY, NOW)
    assert (decision.verdict, decision.reason, decision.verdict.http_status) == (Verdict.QUEUE, "all_saturated", 200)
    assert order(decision) == ["b", "a"]
    assert len(decision.answered) == 2


def test_it_sheds_when_every_eligible_instance_is_over_the_shed_pressure():
    decision = decide([instance("a", requests_waiting=10), instance("b", requests_waiting=40)], Request(), POLICY, NOW)
    assert (decision.verdict, decision.verdict.http_status) == (Verdict.SHED, 429)
    assert decision.answered == []


def test_it_accepts_while_any_instance_has_no_known_pressure():
    decision = decide([instance("full", requests_waiting=40),
                       instance("blind", engine_ok=False, requests_waiting=None, kv_cache_usage_ratio=None)],
                      Request(), POLICY, NOW)
    assert decision.verdict is Verdict.ACCEPT
    assert order(decision) == ["full", "blind"]


def test_it_answers_the_best_count():
    decision = decide([instance(f"i-{n}", requests_waiting=n) for n in range(6)], Request(count=2), POLICY, NOW)
    assert [item.candidate.instance_id for item in decision.answered] == ["i-0", "i-1"]


def test_it_keeps_a_session_on_its_instance_while_that_one_stays_unsaturated():
    candidates = [instance(f"i-{n}") for n in range(8)]
    first = decide(candidates, Request(session_key="user-42"), POLICY, NOW).ranked[0]
    assert first.reasons[-1] == "session_affinity"
    sticky = first.candidate.instance_id
    # The others fill up and empty again; the key stays where it is.
    busier = [instance(c.instance_id, requests_waiting=4) if c.instance_id != sticky else c for c in candidates]
    assert decide(busier, Request(session_key="user-42"), POLICY, NOW).ranked[0].candidate.instance_id == sticky
    loaded = [instance(sticky, requests_waiting=4) if c.instance_id == sticky else c for c in candidates]
    assert decide(loaded, Request(session_key="user-42"), POLICY, NOW).ranked[0].candidate.instance_id == sticky


def test_it_moves_a_session_when_its_instance_saturates_and_back_when_it_drains():
    candidates = [instance(f"i-{n}") for n in range(8)]
    sticky = decide(candidates, Request(session_key="k"), POLICY, NOW).ranked[0].candidate.instance_id
    full = [instance(sticky, requests_waiting=5) if c.instance_id == sticky else c for c in candidates]
    moved = decide(full, Request(session_key="k"), POLICY, NOW).ranked[0].candidate.instance_id
    assert moved != sticky
    assert decide(candidates, Request(session_key="k"), POLICY, NOW).ranked[0].candidate.instance_id == sticky


def test_it_spreads_session_keys_evenly_over_equal_instances():
    candidates = [instance(f"i-{n}") for n in range(4)]
    picks = collections.Counter(
        decide(candidates, Request(session_key=f"session-{n}"), POLICY, NOW).ranked[0].candidate.instance_id
        for n in range(4000)
    )
    assert set(picks) == {"i-0", "i-1", "i-2", "i-3"}
    assert all(850 <= count <= 1150 for count in picks.values()), picks


def test_it_has_no_affinity_pick_when_everything_is_saturated():
    decision = decide([instance("a", requests_waiting=9), instance("b", requests_waiting=6)],
                      Request(session_key="k"), POLICY, NOW)
    assert order(decision) == ["b", "a"]
    assert all("session_affinity" not in item.reasons for item in decision.ranked)
    assert decision.reason == "all_saturated"


def test_a_board_counts_what_it_placed_until_the_next_report():
    board = CandidateBoard()
    for name in ("a", "b", "c"):
        board.put(instance(name))
    picks = []
    for _ in range(6):
        first = board.decide(Request(count=1), POLICY, NOW).ranked[0].candidate.instance_id
        board.placed(first)
        picks.append(first)
    assert sorted(picks) == ["a", "a", "b", "b", "c", "c"]
    board.put(instance("a", reported_at=NOW - 0.1))  # a new report: what it shows replaces the count
    assert board.decide(Request(count=1), POLICY, NOW).ranked[0].candidate.instance_id == "a"


def test_a_board_reuses_the_slot_of_a_removed_instance():
    board = CandidateBoard(capacity=2)
    for name in ("a", "b", "c"):
        board.put(instance(name, requests_waiting=1))
    board.remove("b")
    board.put(instance("d", requests_waiting=0))
    assert len(board) == 3 and "b" not in board
    ranked = order(board.decide(Request(count=5), POLICY, NOW))
    assert ranked[0] == "d" and sorted(ranked) == ["a", "c", "d"]


def test_it_ranks_ten_thousand_instances_as_a_sort_would():
    """The packed key and the partial selection give the order a full sort of the documented key gives."""
    import random
    rng = random.Random(7)
    candidates = [instance(f"i-{n}", requests_waiting=rng.choice([0, 0, 1, 2, 7]),
                           kv_cache_usage_ratio=rng.choice([0.0, 0.25, 0.5]),
                           requests_running=rng.choice([0, 1, 2]),
                           reported_at=NOW - rng.choice([0.1, 0.5, 1.0])) for n in range(10_000)]
    decision = decide(candidates, Request(count=32), POLICY, NOW)

    def key(c):
        pressure = round(max(c.requests_waiting / 5.0, c.kv_cache_usage_ratio / 0.8), 6)
        return (pressure, c.requests_running, round(NOW - c.reported_at, 2))

    best = sorted(candidates, key=key)[:32]
    assert [key(item.candidate) for item in decision.ranked] == [key(c) for c in best]


@pytest.mark.parametrize("count", [1, 3, 32])
@pytest.mark.parametrize("better", [0, 2])
def test_it_breaks_a_large_tie_by_id_hash_then_id_as_a_sort_would(count, better):
    """Hundreds of equal instances (a quiet pool): the first ``count`` by (key, id hash, id), as a full sort gives."""
    candidates = [instance(f"i-{n}", requests_running=1) for n in range(500)]
    candidates += [instance(f"b-{n}") for n in range(better)]  # fewer running: better than the tie
    decision = decide(candidates, Request(count=count), POLICY, NOW)

    def key(c):
        return (c.requests_running, stable_hash(c.instance_id), c.instance_id)

    assert order(decision) == [c.instance_id for c in sorted(candidates, key=key)[:count]]

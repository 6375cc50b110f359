"""Placement with a prompt (SPEC 15.5) as a pure function: rules (a)-(d) and the worked examples of
docs/placement.md ("Placement with a prompt"). No database, no clock."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy_app.placement.decision import EVENTS, PLACEMENTS, Verdict, decide
from proxy_app.placement.inputs import Request
from proxy_app.placement.prefix_cost import PREFIX_WEIGHT, cost_micros
from tests.proxy.test_placement_decision import NOW, POLICY, instance, order

PROMPT = tuple(range(100, 116))  # 16 blocks


def held(hits):
    """A ``prefix_hits`` that answers ``hits`` ({instance_id: blocks}) from any source, and records the source."""
    def ask(source, keys):
        ask.sources.append(source)
        return {instance_id: min(blocks, len(keys)) for instance_id, blocks in hits.items()}
    ask.sources = []
    return ask


def place(candidates, hits, prompt=PROMPT, **request):
    return decide(candidates, Request(prompt_keys=prompt, **request), POLICY, NOW, held(hits))


def test_a_at_equal_pressure_more_cached_prefix_ranks_first():
    candidates = [instance("none"), instance("half"), instance("all")]
    decision = place(candidates, {"half": 8, "all": 16})
    assert order(decision) == ["all", "half", "none"]
    assert [item.prefix_hit_blocks for item in decision.ranked] == [16, 8, 0]
    assert decision.ranked[0].reasons == ("pressure_from_queue", "prefix_cache_hit")


def test_b_at_equal_cached_prefix_the_order_is_the_pressure_s():
    candidates = [instance("busy", requests_waiting=3), instance("idle"), instance("kv", kv_cache_usage_ratio=0.4)]
    without = decide(candidates, Request(), POLICY, NOW)
    assert order(place(candidates, {"busy": 4, "idle": 4, "kv": 4})) == order(without) == ["idle", "kv", "busy"]


def test_c_without_a_prompt_or_without_a_hit_the_order_is_exactly_14_1_s():
    candidates = [instance(f"i-{n}", requests_waiting=n % 3, requests_running=n % 2) for n in range(12)]
    expected = order(decide(candidates, Request(count=12), POLICY, NOW))
    assert order(place(candidates, {}, count=12)) == expected
    assert order(place(candidates, {"elsewhere": 16}, count=12)) == expected
    decision = decide(candidates, Request(count=12), POLICY, NOW, held({"i-3": 16}))
    assert order(decision) == expected and decision.prefix_source is None and decision.prompt_blocks is None


def test_d_a_cached_prefix_never_lifts_a_saturated_instance_over_an_unsaturated_one():
    candidates = [instance("full-cache", requests_waiting=5), instance("nearly-full", requests_waiting=4)]
    decision = place(candidates, {"full-cache": 16})
    assert order(decision) == ["nearly-full", "full-cache"]
    assert [item.pressure for item in decision.ranked] == [0.8, 1.0]


@given(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 16)), min_size=2, max_size=8))
def test_the_rules_hold_for_any_pool(pool):
    candidates = [instance(f"i-{n}", requests_waiting=waiting) for n, (waiting, _) in enumerate(pool)]
    hits = {f"i-{n}": blocks for n, (_, blocks) in enumerate(pool)}
    decision = place(candidates, hits, count=len(pool))
    ranked = [(item.pressure, item.prefix_hit_blocks) for item in decision.ranked]
    for (pressure, blocks), (next_pressure, next_blocks) in zip(ranked, ranked[1:]):
        assert not (pressure >= 1 > next_pressure)  # (d)
        if pressure == next_pressure:
            assert blocks >= next_blocks  # (a)
        if blocks == next_blocks:
            assert pressure <= next_pressure  # (b)
    assert decision.verdict is decide(candidates, Request(), POLICY, NOW).verdict  # a hit never changes a verdict


def test_a_hit_never_changes_a_verdict():
    candidates = [instance("a", requests_waiting=6), instance("b", requests_waiting=11)]
    assert place(candidates, {"a": 16}).verdict is Verdict.QUEUE
    shedding = [instance("a", requests_waiting=10), instance("b", requests_waiting=12)]
    decision = place(shedding, {"a": 16})
    assert decision.verdict is Verdict.SHED and decision.answered == []


def test_it_reads_events_when_an_eligible_instance_publishes_them_else_its_own_placements():
    publishing = [instance("a", kv_events=True), instance("b")]
    asked = held({})
    decision = decide(publishing, Request(prompt_keys=PROMPT), POLICY, NOW, asked)
    assert (decision.prefix_source, asked.sources, decision.prompt_blocks) == (EVENTS, [EVENTS], 16)
    decision = place([instance("a"), instance("b")], {})
    assert decision.prefix_source == PLACEMENTS
    # an instance of another model that publishes does not count: it is not eligible
    decision = place([instance("a"), instance("other", models=frozenset({"x"}), kv_events=True)], {},
                     model="llama")
    assert decision.prefix_source == PLACEMENTS


def test_a_session_key_sticks_among_the_unsaturated_holding_the_longest_prefix():
    candidates = [instance(f"i-{n}") for n in range(6)]
    cached = {"i-1": 16, "i-4": 16, "i-2": 3}
    firsts = {place(candidates, cached, session_key=f"user-{n}", count=1).ranked[0].candidate.instance_id
              for n in range(40)}
    assert firsts == {"i-1", "i-4"}  # spread over the equally cached, never to a lesser one
    again = place(candidates, cached, session_key="user-7", count=1)
    assert again.ranked[0].candidate.instance_id == place(candidates, cached, session_key="user-7",
                                                          count=1).ranked[0].candidate.instance_id
    assert again.reason == "session_affinity"


def test_a_prompt_shorter_than_a_block_has_no_blocks_and_the_14_1_order():
    candidates = [instance("b", requests_waiting=1), instance("a")]
    decision = place(candidates, {"b": 1}, prompt=())
    assert order(decision) == ["a", "b"] and decision.prompt_blocks == 0


# --- docs/placement.md, "Placement with a prompt", worked examples (W = 5, K = 0.8, 16 blocks of 16 tokens)

def test_example_5_a_whole_cached_prompt_is_worth_a_busier_instance():
    """``warm`` has 2 waiting (0.4) and holds all 16 blocks: cost 0.4 + 0 = 0.4. ``cold`` is idle with
    nothing cached: 0 + 1 = 1.0. ``warm`` first."""
    decision = place([instance("cold"), instance("warm", requests_waiting=2)], {"warm": 16})
    assert order(decision) == ["warm", "cold"]


def test_example_6_half_a_prompt_is_worth_half_a_unit_of_pressure():
    """``half`` holds 8 of 16 blocks at 0.6 (3 waiting): 0.6 + 0.5 = 1.1. ``idle`` holds none at 0: 1.0.
    ``idle`` first; at 2 waiting (0.4) ``half`` costs 0.9 and goes first."""
    assert order(place([instance("half", requests_waiting=3), instance("idle")], {"half": 8})) == ["idle", "half"]
    assert order(place([instance("half", requests_waiting=2), instance("idle")], {"half": 8})) == ["half", "idle"]


def test_example_7_a_saturated_cache_holder_waits_behind_the_unsaturated():
    """``hot`` holds everything at 1.2 (6 waiting): cost 1.2 + 0 + 1 = 2.2; ``cool`` holds nothing at 0.9:
    1.9. ``cool`` first, and the verdict is ``accept`` either way."""
    decision = place([instance("hot", requests_waiting=6), instance("cool", kv_cache_usage_ratio=0.72)], {"hot": 16})
    assert order(decision) == ["cool", "hot"] and decision.verdict is Verdict.ACCEPT


@pytest.mark.parametrize("pressure, hit, expected", [(0.4, 16, 400_000), (0.0, 0, 1_000_000), (0.6, 8, 1_100_000),
                                                     (1.2, 16, 2_200_000)])
def test_the_cost_is_pressure_plus_the_uncached_fraction_plus_a_band_for_the_saturated(pressure, hit, expected):
    import numpy as np

    micros = np.array([round(pressure * 1e6)])
    assert cost_micros(micros, np.array([pressure]), np.array([hit]), 16)[0] == expected
    assert PREFIX_WEIGHT == 1.0


# Queues of ~171,790 (W = 5) are pressures within two units of the ranking key's cap (~34,359.7): a cost that
# reaches it ties instances their pressures told apart.
WAITING = st.one_of(st.integers(0, 40), st.integers(171_780, 171_800), st.just(10**6))


@given(st.lists(st.tuples(WAITING, st.integers(0, 3), st.integers(0, 16), st.booleans(), st.sampled_from([0.1, 0.5])),
                min_size=1, max_size=30), st.integers(1, 4))
def test_the_few_answered_are_the_head_of_the_whole_ranking(pool, count):
    """The decision works out the signal's age, and with a prompt the cost, only for the instances that can be
    answered: the same answer as ranking every instance by its whole key (no hit anywhere: 14.1's)."""
    candidates = [instance(f"i-{n}", requests_waiting=waiting, requests_running=running, engine_ok=engine,
                           gpu_util=40.0, reported_at=NOW - age)
                  for n, (waiting, running, _, engine, age) in enumerate(pool)]
    hits = {f"i-{n}": blocks for n, (_, _, blocks, _, _) in enumerate(pool)}
    whole = order(place(candidates, hits, count=len(pool)))
    assert order(place(candidates, hits, count=count)) == whole[:count]


@pytest.mark.parametrize("lower, higher", [("x", "y"), ("y", "x")])
def test_costs_at_the_key_s_cap_tie_as_they_would_over_the_whole_board(lower, higher):
    candidates = [instance("cached"), instance(lower, requests_waiting=171_790),
                  instance(higher, requests_waiting=171_795)]
    whole = order(place(candidates, {"cached": 16}, count=3))
    assert whole[0] == "cached" and set(whole[1:]) == {"x", "y"}
    assert order(place(candidates, {"cached": 16}, count=2)) == whole[:2]

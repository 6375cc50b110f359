"""Issue 32's simulator, its pure parts: the engines' prefix cache, what they publish, the prompt workloads,
the cache-aware policies' question and the score. No network and no clock: wall times are passed in."""

import argparse
from random import Random

import pytest
from rich.console import Console

from agent.prefix_keys import prompt_keys
from simulator import cli, routing
from simulator.cli import routing_config
from simulator.display import routing_table
from simulator.engines import SimulatedEngine
from simulator.model import build_fleet
from simulator.prefix_cache import MAX_ITEMS, PrefixCache, PrefixPublisher
from simulator.prompts import NO_PREFIX, SHARED_PREFIX, Chain, Prompt, PromptWorkload, draw_tokens
from simulator.routing_run import ROUTING_PROFILE, prepare_fleet, service_rate
from simulator.workload import MODEL, PolicyScore, RoutedRequest, RoutingWorkload, verdicts
from tests.factories import T0_MS

SHARED = RoutingWorkload.of(SHARED_PREFIX, seed=3, duration_s=30.0)
UNIQUE = RoutingWorkload.of(NO_PREFIX, seed=3, duration_s=30.0)


def keys(*blocks):
    """Made-up keys: one int a block."""
    return tuple(blocks)


# --- the cache -------------------------------------------------------------------------


def test_a_lookup_is_the_longest_leading_run_it_holds():
    cache = PrefixCache(capacity_blocks=10, block_tokens=16)
    cache.store(keys(1, 2, 3))

    assert cache.lookup(keys(1, 2, 3, 4), prompt_tokens=70) == 48
    assert cache.lookup(keys(9, 2), prompt_tokens=40) == 0  # a run starts at the prompt's first block
    assert cache.lookup(keys(1, 9, 3), prompt_tokens=50) == 16
    assert (cache.hit_tokens, cache.query_tokens) == (64, 160)


def test_a_wholly_cached_prompt_still_computes_its_last_token():
    cache = PrefixCache(capacity_blocks=10, block_tokens=16)
    cache.store(keys(1, 2))

    assert cache.lookup(keys(1, 2), prompt_tokens=32) == 31


def test_at_capacity_it_evicts_the_least_recently_used():
    cache = PrefixCache(capacity_blocks=3)
    cache.store(keys(1, 2, 3))
    cache.lookup(keys(1))  # 1 is used again: 2 is now the oldest
    cache.store(keys(4))

    assert list(cache.blocks) == [3, 1, 4]
    assert len(cache) == 3


def test_its_changes_are_what_the_proxy_has_not_heard_and_cancel_out():
    cache = PrefixCache(capacity_blocks=2)
    cache.store(keys(1, 2))
    assert cache.take_changes() == ([1, 2], [])

    cache.store(keys(3))  # evicts 1, which the Proxy holds
    cache.store(keys(4, 5))  # evicts 2 and 3: 3 was never sent, so it is neither added nor removed
    assert cache.take_changes() == ([4, 5], [1, 2])

    cache.store(keys(1))  # evicts 4; 1 was sent removed, now stored again
    cache.store(keys(4))  # evicts 5, stores 4 again: the Proxy's copy already has it
    assert cache.take_changes() == ([1], [5])
    assert cache.take_changes() == ([], [])


def test_its_kv_events_object_has_the_spec_fields():
    cache = PrefixCache(capacity_blocks=8, block_tokens=16)
    cache.store(keys(1, 2), now_ms=T0_MS)

    assert cache.kv_events(T0_MS + 300) == {
        "status": "ok", "error": None, "resident_blocks": 2, "events_total": 1, "gaps_total": 0,
        "last_event_age_ms": 300, "block_tokens": 16}


# --- the publisher ---------------------------------------------------------------------


def test_it_publishes_a_reset_first_then_deltas_with_seq_counting_up():
    cache = PrefixCache(capacity_blocks=2, block_tokens=16)
    publisher = PrefixPublisher("i-1", "e", cache, epoch=7)
    cache.store(keys(1, 2))

    [first] = publisher.bodies()
    assert first == {"instance_id": "i-1", "engine": "e", "epoch": 8, "seq": 0, "block_tokens": 16, "reset": True,
                     "added": [1, 2], "removed": []}
    assert publisher.answered(200, {"ok": True, "resync": False})
    assert publisher.bodies() == []  # nothing changed: nothing sent

    cache.store(keys(3))
    [second] = publisher.bodies()
    assert (second["epoch"], second["seq"], second["reset"], second["added"], second["removed"]) == (8, 1, False,
                                                                                                      [3], [1])


@pytest.mark.parametrize("status, answer", [
    (200, {"ok": True, "resync": True}),
    (200, {"ok": False, "error": "unknown_instance"}),
    (503, None),
    (None, None),
])
def test_after_a_resync_or_a_failure_it_sends_its_whole_set_again_in_a_new_epoch(status, answer):
    cache = PrefixCache(capacity_blocks=4)
    publisher = PrefixPublisher("i-1", "e", cache)
    cache.store(keys(1, 2))
    publisher.answered(200, {"ok": True, "resync": False}) if publisher.bodies() else None
    cache.store(keys(3))
    publisher.bodies()
    publisher.answered(status, answer)

    [body] = publisher.bodies()
    assert (body["reset"], body["epoch"], body["seq"], body["added"]) == (True, 2, 0, [1, 2, 3])


def test_a_restarted_engine_sends_a_reset_of_nothing():
    cache = PrefixCache(capacity_blocks=4)
    publisher = PrefixPublisher("i-1", "e", cache)
    cache.store(keys(1, 2))
    publisher.answered(200, {"ok": True, "resync": False}) if publisher.bodies() else None
    cache.clear()

    [body] = publisher.bodies()
    assert (body["reset"], body["added"], body["removed"]) == (True, [], [])


def test_a_large_set_is_one_reset_and_ordinary_bodies_of_at_most_the_spec_limit():
    cache = PrefixCache(capacity_blocks=40_000)
    cache.store(range(MAX_ITEMS * 2 + 5))
    bodies = PrefixPublisher("i-1", "e", cache).bodies()

    assert [(body["reset"], body["seq"], len(body["added"])) for body in bodies] == [
        (True, 0, MAX_ITEMS), (False, 1, MAX_ITEMS), (False, 2, 5)]


# --- the prompts -----------------------------------------------------------------------


def test_a_chain_grown_a_segment_at_a_time_has_the_keys_of_the_whole_sequence():
    rng = Random(1)
    parts = [draw_tokens(rng, n) for n in (37, 5, 16, 100)]
    chain = Chain(MODEL)
    for part in parts:
        chain = chain.extended(part)

    whole = [token for part in parts for token in part]
    assert chain.keys == tuple(prompt_keys(MODEL, whole, 16))
    assert chain.tokens == len(whole) == 158
    assert all(0 <= token < 2 ** 32 for token in whole)


def test_the_same_seed_gives_the_same_prompts_and_both_kinds_the_same_times_and_lengths():
    shared = SHARED.arrivals(8.0)
    unique = UNIQUE.arrivals(8.0)

    assert shared == SHARED.arrivals(8.0)
    assert shared != RoutingWorkload.of(SHARED_PREFIX, seed=4, duration_s=30.0).arrivals(8.0)
    assert [(at, prompt.tokens, output) for at, prompt, output in shared] == [
        (at, prompt.tokens, output) for at, prompt, output in unique]
    assert [at for at, _, _ in shared] == sorted(at for at, _, _ in shared)
    assert all(0.0 <= at < 30.0 for at, _, _ in shared)


def test_shared_prefix_prompts_share_their_tenants_system_prompts_and_their_sessions_history():
    workload = PromptWorkload(kind=SHARED_PREFIX)
    stream = workload.arrivals(MODEL, 3, 8.0, 30.0)
    prompts = [prompt for _, prompt, _ in stream]
    firsts = {prompt.keys[0] for prompt in prompts}

    assert len(firsts) <= workload.tenants  # every prompt starts with one of the tenants' system prompts
    assert workload.system_min <= min(prompt.tokens for prompt in prompts)
    # A later turn of a session holds the earlier turn's prompt and its answer as its prefix.
    extended = [b for a in prompts for b in prompts
                if len(b.keys) > len(a.keys) + len(a.answer_keys) and b.keys[:len(a.keys)] == a.keys
                and b.keys[len(a.keys):len(a.keys) + len(a.answer_keys)] == a.answer_keys and a.answer_keys]
    assert extended


def test_no_prefix_prompts_share_nothing():
    prompts = [prompt for _, prompt, _ in UNIQUE.arrivals(8.0)]
    all_keys = [key for prompt in prompts for key in prompt.keys]

    assert len(all_keys) == len(set(all_keys))


def test_the_rate_comes_from_the_fleet_at_the_prompts_mean_length():
    workload = PromptWorkload()

    assert SHARED.prompt_mean == workload.prompt_mean > workload.system_min
    stream = SHARED.arrivals(8.0)
    assert 0.8 * 8.0 * 30 < len(stream) < 1.1 * 8.0 * 30  # sessions' later turns past the end are not sent


# --- the engines with a prefix cache ------------------------------------------------------


def cached_engine(gpus=1, tokens_per_gpu=12_000):
    engine = SimulatedEngine(0, 0, MODEL, gpus, ROUTING_PROFILE)
    engine.routed_only = True
    engine.keep_prefix_cache(tokens_per_gpu, 16)
    engine.advance(T0_MS, 0.0)
    return engine


def prompt_of(tokens, answer=()):
    chain = Chain(MODEL).extended(tokens)
    done = chain.extended(list(answer))
    return Prompt(chain.tokens, chain.keys, done.keys[len(chain.keys):])


def test_a_cached_prefix_is_not_prefilled_again():
    engine = cached_engine()
    rate = engine.ranks[0].prefill_tokens_per_s
    system = list(range(4000))
    first = RoutedRequest(prompt_of(system + [1] * 100), 10)
    engine.submit(first, T0_MS)
    later = RoutedRequest(prompt_of(system + [2] * 100), 10)
    engine.submit(later, T0_MS + 10_000)

    assert first.cached_tokens == 0
    assert later.cached_tokens == 4000  # 250 blocks of the system prompt
    assert (later.first_token_ms - T0_MS - 10_000) / 1000.0 == pytest.approx(0.01 + 100 / rate)
    assert (first.first_token_ms - T0_MS) / 1000.0 == pytest.approx(0.01 + 4100 / rate)


def test_prefills_go_one_after_another():
    engine = cached_engine(gpus=2)
    rate = engine.ranks[0].prefill_tokens_per_s
    a, b = RoutedRequest(prompt_of(list(range(3200))), 10), RoutedRequest(prompt_of(list(range(5, 3205))), 10)
    engine.submit(a, T0_MS)
    engine.submit(b, T0_MS)

    assert (b.first_token_ms - a.first_token_ms) / 1000.0 == pytest.approx(0.01 + 3200 / rate)


def test_a_finished_answer_is_cached_for_the_next_turn():
    engine = cached_engine()
    turn = list(range(1000))
    answer = list(range(5000, 5064))
    request = RoutedRequest(prompt_of(turn, answer), 64)
    engine.submit(request, T0_MS)
    for step in range(1, 200):
        engine.advance(T0_MS + step * 100, 0.0)

    assert request.done_ms is not None
    after = RoutedRequest(prompt_of(turn + answer + [7] * 40), 5)
    engine.submit(after, T0_MS + 30_000)
    assert after.cached_tokens == 1056  # 66 blocks: the prompt's 62 and the answer's 4 (the 1,064th token's left)


def test_a_crashed_engine_forgets_its_cache():
    engine = cached_engine()
    engine.submit(RoutedRequest(prompt_of(list(range(800))), 5), T0_MS)
    engine.kill()

    assert len(engine.ranks[0].cache) == 0 and engine.ranks[0].cache.cleared


def test_its_engine_objects_carry_kv_events_or_null_where_it_publishes_none():
    hosts = build_fleet(range(4), 4, seed=3, profile=ROUTING_PROFILE)
    prepare_fleet(hosts[:2], SHARED, routing.PLACEMENT)
    prepare_fleet(hosts[2:], SHARED, routing.PLACEMENT_LEARNED)
    objects = {host.index: host.snapshot(T0_MS)["engines"] for host in hosts}

    for index in (0, 1):
        assert all(obj["kv_events"]["status"] == "ok" and obj["kv_events"]["block_tokens"] == 16
                   for obj in objects[index])
    for index in (2, 3):
        assert all(obj["kv_events"] is None for obj in objects[index])
    plain = build_fleet(range(1), 1, seed=3, profile=ROUTING_PROFILE)[0]
    assert plain.snapshot(T0_MS)["engines"][0]["kv_events"] is None  # not configured


def test_a_prompt_workload_sizes_the_caches_per_gpu_and_the_rate_by_the_prefills():
    hosts = build_fleet(range(4), 4, seed=3, profile=ROUTING_PROFILE)
    prepare_fleet(hosts, SHARED)

    for host in hosts:
        for rank in host.engine.ranks:
            assert rank.cache.capacity == SHARED.cache_tokens_per_gpu * rank.gpu_count // 16
            assert service_rate(host.engine, SHARED) <= sum(
                r.prefill_tokens_per_s / SHARED.prompt_mean for r in host.engine.ranks) + 1e-9


# --- the policies' question and the score ---------------------------------------------------


def test_the_placement_policies_send_the_prompts_keys_but_load_only_does_not():
    prompt = prompt_of(list(range(100)))
    load = routing.placement_body(routing.PLACEMENT_LOAD, MODEL, 100, 20, 3, prompt.keys)
    aware = routing.placement_body(routing.PLACEMENT, MODEL, 100, 20, 3, prompt.keys, ["x"])
    learned = routing.placement_body(routing.PLACEMENT_LEARNED, MODEL, 100, 20, 3, prompt.keys)

    assert load == {"model": MODEL, "prompt_tokens": 100, "max_tokens": 20, "count": 3}
    assert aware == {**load, "prompt_block_keys": list(prompt.keys), "exclude": ["x"]}
    assert learned["prompt_block_keys"] == list(prompt.keys) and len(prompt.keys) == 6
    assert routing.publishes(routing.PLACEMENT) and not routing.publishes(routing.PLACEMENT_LEARNED)
    assert routing.policies_for("mixed") == routing.MIXED_POLICIES
    assert routing.policies_for(SHARED_PREFIX) == routing.POLICIES


def test_the_row_has_the_hit_ratio_of_the_served_and_the_output_tokens_a_second():
    score = PolicyScore(duration_s=10.0)
    for cached in (0, 600):
        request = RoutedRequest(prompt_of(list(range(800))), 5)
        request.cached_tokens = cached
        score.served(0.1, request)
    score.completed(300, 9.0)
    score.completed(200, 11.0)  # after the traffic: not counted
    row = score.as_row()

    assert row["prefix_hit_ratio"] == 0.375
    assert row["output_tokens_per_s"] == 30.0
    assert PolicyScore().as_row()["prefix_hit_ratio"] is None


def test_the_prompt_workloads_targets():
    def row(p90):
        return {"ttft_p90_s": p90, "served": 1, "sent_to_failed_host_after_2s": 0}

    table = {"placement": row(0.4), "placement-load": row(1.0), "round-robin": row(1.5)}
    assert verdicts(table, SHARED_PREFIX) == {"placement_p90_le_0.5_placement_load": True,
                                              "placement_p90_le_0.25_round_robin": False}
    assert verdicts({"placement": row(1.04), "placement-load": row(1.0)}, NO_PREFIX) == {
        "placement_p90_le_1.05_placement_load": True}
    assert verdicts({"placement": row(1.0)}, SHARED_PREFIX)["placement_p90_le_0.5_placement_load"] is None


# --- the command line and the table ---------------------------------------------------------


def parsed(*argv):
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return vars(parser.parse_args(["--routing-benchmark", *argv]))


def test_the_command_takes_a_workload_and_routes_it_by_its_policies():
    shared = routing_config(parsed("--workload", "shared-prefix", "--seed", "4"))
    mixed = routing_config(parsed())
    one = routing_config(parsed("--workload", "no-prefix", "--route", "placement-learned"))

    assert (shared.workload.kind, shared.workload.seed, shared.policies) == (SHARED_PREFIX, 4, routing.POLICIES)
    assert shared.workload.prompt_mean == PromptWorkload().prompt_mean
    assert (mixed.workload.kind, mixed.policies, mixed.workload.prompts) == ("mixed", routing.MIXED_POLICIES, None)
    assert (one.workload.kind, one.policies) == (NO_PREFIX, ("placement-learned",))


def test_the_table_shows_the_hit_ratio_and_the_tokens_a_second_of_a_prompt_workload():
    row = {**PolicyScore(duration_s=10.0).as_row(), "prefix_hit_ratio": 0.8547, "output_tokens_per_s": 1323.4}
    result = {"routing": {"placement": row}, "targets": verdicts({"placement": row}, SHARED_PREFIX),
              "workload": {"kind": SHARED_PREFIX, "prompts": {}, "hosts": 12, "gpu_counts": [1, 2], "seed": 0,
                           "rate_per_s": 12.7, "duration_s": 60.0}}
    console = Console(width=160)
    with console.capture() as capture:
        console.print(routing_table(result))

    text = capture.get()
    assert "85.5%" in text and "1323" in text and "shared-prefix workload" in text

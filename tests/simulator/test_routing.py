"""The routing benchmark's pure parts: the workload, the client policies, the placement answer, the engines
serving routed requests, the score. No network and no clock: wall times are passed in."""

import pytest

from simulator import routing
from simulator.engines import SimulatedEngine
from simulator.model import build_fleet
from simulator.routing_run import ROUTING_PROFILE, prepare_fleet, service_rate
from simulator.workload import PolicyScore, RoutedRequest, RoutingWorkload, quantile, verdicts
from tests.factories import T0_MS

WORKLOAD = RoutingWorkload(seed=3, duration_s=30.0)
FLEET = frozenset({"r-0", "r-1", "r-2"})


def engine(gpus=1, seed=0):
    served = SimulatedEngine(seed, 0, "m", gpus, ROUTING_PROFILE)
    served.routed_only = True
    served.advance(T0_MS, 0.0)
    return served


def first_token_s(request, at_ms):
    return (request.first_token_ms - at_ms) / 1000.0


# --- the workload --------------------------------------------------------------------


def test_the_same_seed_gives_the_same_arrivals_and_roles():
    again = RoutingWorkload(seed=3, duration_s=30.0)

    assert WORKLOAD.arrivals(10.0) == again.arrivals(10.0)
    assert WORKLOAD.roles() == again.roles()
    assert WORKLOAD.arrivals(10.0) != RoutingWorkload(seed=4, duration_s=30.0).arrivals(10.0)


def test_arrivals_come_at_the_rate_within_the_duration():
    stream = WORKLOAD.arrivals(20.0)

    assert 0.9 * 600 < len(stream) < 1.1 * 600
    assert all(0.0 < at < 30.0 for at, _, _ in stream)
    assert [at for at, _, _ in stream] == sorted(at for at, _, _ in stream)
    assert 800 < sum(prompt for _, prompt, _ in stream) / len(stream) < 1200
    assert WORKLOAD.arrivals(0.0) == []


def test_each_role_goes_to_its_own_host_and_the_ill_ones_have_several_gpus():
    for seed in range(20):
        workload = RoutingWorkload(seed=seed)
        roles = workload.roles()

        assert sorted(roles.values()) == ["dead", "slow", "unhealthy", "unhealthy"]
        for index, role in roles.items():
            if role in ("unhealthy", "slow"):
                assert workload.gpu_count(index) > 1


def test_the_rate_is_the_load_of_the_hosts_that_stay_healthy():
    roles = WORKLOAD.roles()
    rates = {index: 1.0 for index in range(WORKLOAD.hosts)}

    assert WORKLOAD.rate_per_s(rates) == pytest.approx(0.7 * (WORKLOAD.hosts - len(roles)))


def test_the_fleet_has_its_gpu_counts_in_turn_one_model_and_an_error_gpu_where_the_roles_say():
    hosts = build_fleet(range(12), 12, seed=3, profile=ROUTING_PROFILE)
    roles = prepare_fleet(hosts, WORKLOAD)
    rows = {host.index: host.snapshot(T0_MS)["devices"]["gpu"] for host in hosts}

    assert [host.shape.gpu_count for host in hosts] == [1, 2, 4, 8] * 3
    assert {host.engine.model for host in hosts} == {"meta-llama/Llama-3.1-8B-Instruct"}
    assert {index for index, gpus in rows.items() if any(gpu["health"] == "error" for gpu in gpus)} == {
        index for index, role in roles.items() if role == "unhealthy"}
    assert service_rate(hosts[3].engine, WORKLOAD) > service_rate(hosts[0].engine, WORKLOAD)


# --- the engines serve what is routed to them ----------------------------------------


def test_an_idle_engine_gives_the_first_token_after_the_prefill():
    served, request = engine(), RoutedRequest(800, 50)

    assert served.submit(request, T0_MS + 100)
    assert 0.01 < first_token_s(request, T0_MS + 100) < 0.5
    assert len(served.ranks[0].running) == 1


def test_a_full_engine_queues_and_starts_the_next_when_one_finishes():
    served = engine()
    capacity = served.ranks[0].max_num_seqs
    requests = [RoutedRequest(200, 20) for _ in range(capacity + 1)]
    for request in requests:
        served.submit(request, T0_MS + 100)
    last = requests[-1]

    assert last.first_token_ms is None and served.requests_waiting == 1
    now = T0_MS + 100
    while last.first_token_ms is None:
        now += 50
        served.advance(now, 0.0)
    assert any(request.done_ms is not None for request in requests[:-1])
    assert first_token_s(last, T0_MS + 100) > 0.3  # it waited for a slot
    assert served.requests_waiting == 0


def test_a_slowed_engine_takes_longer_to_the_first_token():
    fast, slow = engine(), engine()
    slow.slow_down(4.0)
    a, b = RoutedRequest(1000, 50), RoutedRequest(1000, 50)
    fast.submit(a, T0_MS + 100)
    slow.submit(b, T0_MS + 100)

    assert first_token_s(b, T0_MS + 100) > 3 * first_token_s(a, T0_MS + 100) - 0.05


def test_a_killed_engine_fails_what_it_held_and_refuses_what_comes():
    served = engine()
    held = [RoutedRequest(200, 500) for _ in range(served.ranks[0].max_num_seqs + 2)]
    for request in held:
        served.submit(request, T0_MS + 100)
    served.kill()
    served.advance(T0_MS + 600_000, 0.0)  # a dead server never comes back

    assert all(request.failed for request in held)
    assert not served.submit(RoutedRequest(10, 10), T0_MS + 600_100)
    assert served.objects(T0_MS + 600_100)[0]["status"] == "unreachable"


def test_an_abandoned_request_is_dropped_from_the_queue():
    served = engine()
    capacity = served.ranks[0].max_num_seqs
    requests = [RoutedRequest(200, 20) for _ in range(capacity + 1)]
    for request in requests:
        served.submit(request, T0_MS + 100)
    requests[-1].abandoned = True
    for step in range(1, 200):
        served.advance(T0_MS + 100 + step * 50, 0.0)

    assert requests[-1].first_token_ms is None and served.requests_waiting == 0


def test_what_it_reports_counts_the_routed_requests():
    served = engine(gpus=2)
    for _ in range(3):
        served.submit(RoutedRequest(500, 400), T0_MS + 100)
    served.advance(T0_MS + 1100, 0.0)
    [obj] = served.objects(T0_MS + 1100)

    assert obj["requests_running"] == 3 and obj["requests_waiting"] == 0 and obj["kv_cache_usage_ratio"] > 0


# --- the client policies and the placement answer ----------------------------------------


def test_round_robin_takes_the_instances_in_turn():
    policy = routing.RoundRobin()
    policy.update(["a", "b", "c"])

    assert [policy.choose(0.0) for _ in range(5)] == ["a", "b", "c", "a", "b"]


def test_least_inflight_takes_the_fewest_in_flight_and_ties_in_turn():
    policy = routing.LeastInflight()
    policy.update(["a", "b", "c"])
    policy.started("a")
    policy.started("a")
    policy.started("b")

    assert policy.choose(0.0) == "c"
    policy.started("c")
    assert policy.choose(0.0) in {"b", "c"}
    policy.finished("a")
    policy.finished("a")
    assert policy.choose(0.0) == "a"


def test_random_is_seeded_and_a_policy_with_no_instances_has_no_choice():
    one, two = routing.RandomChoice(seed=5), routing.RandomChoice(seed=5)
    one.update(["a", "b", "c"])
    two.update(["a", "b", "c"])

    assert [one.choose(0.0) for _ in range(20)] == [two.choose(0.0) for _ in range(20)]
    assert routing.RoundRobin().choose(0.0) is None and routing.LeastInflight().choose(0.0) is None


@pytest.mark.parametrize("policy", [routing.RoundRobin, routing.LeastInflight, routing.RandomChoice])
def test_a_client_leaves_out_a_failed_instance_for_the_fail_timeout(policy):
    client = policy()
    client.update(["a", "b"])
    client.failed("a", now_s=5.0)

    assert {client.choose(5.0) for _ in range(10)} == {"b"}
    assert {client.choose(5.0 + routing.FAIL_TIMEOUT_S) for _ in range(10)} == {"a", "b"}
    client.failed("b", now_s=6.0)
    assert client.choose(6.0) in {"a", "b"}  # every one left out: all of them again, as nginx does
    assert client.choose(20.0, exclude=["a"]) == "b" and client.choose(20.0, exclude=["a", "b"]) is None


def test_a_client_routes_over_the_alive_instances_of_its_fleet():
    rows = [{"instance_id": "r-0", "status": "alive"}, {"instance_id": "r-1", "status": "suspect"},
            {"instance_id": "other", "status": "alive"}, {"instance_id": "r-2", "status": "alive"}, "junk"]

    assert routing.routable(rows, FLEET) == ["r-0", "r-2"]
    assert routing.routable({"ok": False}, FLEET) == []


@pytest.mark.parametrize(("status", "data", "expected"), [
    (200, {"verdict": "accept", "candidates": [{"instance_id": "other"}, {"instance_id": "r-1"}]},
     (routing.SEND, "r-1")),
    (200, {"verdict": "queue", "candidates": [{"instance_id": "r-2"}]}, (routing.SEND, "r-2")),
    (200, {"verdict": "accept", "candidates": []}, (routing.UNAVAILABLE, None)),
    (429, {"verdict": "shed", "candidates": [{"instance_id": "r-0"}]}, (routing.SHED, None)),
    # The route lane's 429 is no verdict: counted apart from a shed (issue 47).
    (429, {"ok": False, "error": "route_busy", "detail": {"body": ["…"]}}, (routing.ROUTE_BUSY, None)),
    (503, {"verdict": "unavailable", "candidates": []}, (routing.UNAVAILABLE, None)),
    (404, {"ok": False, "error": "not_found"}, (routing.ROUTE_ERROR, None)),
    (200, None, (routing.ROUTE_ERROR, None)),
])
def test_it_reads_a_placement_answer(status, data, expected):
    assert routing.placement_choice(status, data, FLEET) == expected


# --- the score ------------------------------------------------------------------------


def test_a_request_to_a_failed_host_counts_after_the_grace():
    score = PolicyScore()
    score.sent(12.0, None)
    score.sent(11.9, 10.0)
    score.sent(12.1, 10.0)

    assert score.as_row()["sent_to_failed_host_after_2s"] == 1


def test_the_row_has_the_quantiles_of_the_served_and_every_failure_counted():
    score = PolicyScore(requests=104, shed=1, unavailable=1, errors=1, timeouts=1)
    for n in range(1, 101):
        score.served(n / 100)
    row = score.as_row()

    assert (row["ttft_p50_s"], row["ttft_p90_s"], row["ttft_p99_s"]) == (0.5, 0.9, 0.99)
    assert row["served"] == 100 and row["shed"] == 1 and row["failed"] == 3
    assert quantile([], 0.5) is None


def test_the_row_counts_a_full_route_lane_apart_from_a_shed():
    row = PolicyScore(requests=3, shed=1, route_busy=2).as_row()
    assert (row["shed"], row["route_busy"], row["failed"]) == (1, 2, 0)


def test_the_route_listener_is_the_web_port_plus_one_unless_named():
    from simulator.routing_run import RoutingConfig

    assert RoutingConfig(proxy_url="http://127.0.0.1:8000/").placement_url == "http://127.0.0.1:8001"
    assert RoutingConfig(proxy_url="http://pool.example").placement_url == "http://pool.example:81"
    assert RoutingConfig(route_url="http://10.0.0.1:9001/").placement_url == "http://10.0.0.1:9001"


def test_the_table_prints_shed_and_route_busy_apart():
    from rich.console import Console

    from simulator.display import routing_table

    row = {**PolicyScore(requests=5, shed=1, route_busy=2).as_row(), "feedback_route_busy": 3, "feedback_failures": 0}
    result = {"routing": {"placement": row}, "route_url": "http://127.0.0.1:8001", "targets": {},
              "workload": {"hosts": 4, "gpu_counts": [1], "seed": 0, "rate_per_s": 1.0, "duration_s": 5}}
    console = Console(width=200, record=True)
    console.print(routing_table(result))
    text = console.export_text()
    assert "shed" in text and "route busy" in text
    assert "placement's feedback: 3 route busy, 0 failed" in text
    assert "http://127.0.0.1:8001 (the route listener)" in text


def test_the_targets_compare_the_p90s_and_judge_nothing_that_was_not_run():
    row = {"ttft_p90_s": 1.0, "served": 10, "sent_to_failed_host_after_2s": 0}
    table = {"placement": row, "round-robin": {**row, "ttft_p90_s": 1.5}, "least-inflight": {**row, "ttft_p90_s": 1.05}}

    assert verdicts(table) == {"placement_p90_le_0.7_round_robin": True,
                               "placement_p90_le_0.9_least_inflight": False,
                               "placement_none_to_failed_host_after_2s": True}
    assert set(verdicts({"round-robin": row}).values()) == {None}

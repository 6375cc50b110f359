"""The simulated serving engines: a queue model reported as SPEC 13's engine objects.

No network and no clock: wall times are passed in, every random choice
comes from the seed. The objects are compared with those of our real agent
scraping a real vLLM capture (``agent_snapshot`` in conftest.py).
"""

import argparse
import statistics

import pytest

from agent.engines.figures import FIGURES
from simulator.cli import add_arguments, run_config
from simulator.engines import ENGINE_URL, SimulatedEngine
from simulator.model import FleetProfile, SimulatedHost, build_fleet
from tests.factories import T0_MS

QUIET = FleetProfile(engine_fault_share=0.0, engine_bursts_per_hour=0.0, unhealthy_gpu_share=0.0)
WINDOWED = ("prefix_cache_hit_ratio", "preemptions", "prompt_tokens_per_s", "generation_tokens_per_s",
            "ttft_p50_s", "ttft_p95_s", "itl_p50_s")
FAILED = {"timeout", "unreachable", "http_error"}


def drive(engine, seconds, load, start_ms=T0_MS, step_ms=1000):
    """Advance ``engine`` a step at a time at ``load``; its one object after each step."""
    objects = []
    for step in range(1, round(seconds * 1000 / step_ms) + 1):
        now_ms = start_ms + step * step_ms
        engine.advance(now_ms, load)
        [obj] = engine.objects(now_ms)
        objects.append(obj)
    return objects


def engine_objects(hosts, rounds):
    """Every engine object the hosts report over ``rounds`` one-second slots, with its host."""
    return [(host, obj) for number in range(rounds) for host in hosts
            for obj in host.snapshot(T0_MS + number * 1000).get("engines", [])]


def test_its_engine_objects_have_the_agents_keys_order_and_types(agent_snapshot):
    [agents] = agent_snapshot["engines"]
    agents = {**agents, "kv_events": agents.get("kv_events")}  # SPEC 15.2 (an agent before it has none): last
    profile = FleetProfile(engine_fault_share=0.2, engine_fault_mean_s=20.0, capabilities_share=1.0)
    hosts = [host for host in build_fleet(range(40), 40, seed=1, profile=profile) if host.engine.adapter]
    objects = [obj for _, obj in engine_objects(hosts, 120)]

    assert hosts and len(objects) >= 120 * len(hosts)
    for obj in objects:
        assert list(obj) == list(agents)
    for key, value in agents.items():
        types = {type(obj[key]) for obj in objects if obj[key] is not None}
        if key == "kv_events":  # not configured in the capture, nor in a plain fleet: null
            assert types == set(), key
        elif value is None:  # no error, no LoRA and no /v1/models in the capture: SPEC 13's and 16.1's types
            assert types == {dict if key == "lora" else list if key == "served" else str}, key
        else:
            assert types == {type(value)}, key
    loras = [obj["lora"] for obj in objects if obj["lora"] is not None]
    assert {tuple(lora) for lora in loras} == {("max", "running", "waiting")}
    assert all(isinstance(lora["max"], int) for lora in loras)
    assert {name for lora in loras for name in lora["running"] + lora["waiting"]} == {"sql-lora"}


def test_its_objects_say_what_the_spec_says_of_each_figure():
    host = SimulatedHost(2, seed=2, profile=FleetProfile(gpu_counts=(4,), engine_fault_share=0.0))
    snapshots = [host.snapshot(T0_MS + i * 1000) for i in range(60)]
    objects = [snapshot["engines"][0] for snapshot in snapshots]

    for snapshot, obj in zip(snapshots, objects):
        assert obj["url"] == ENGINE_URL and obj["kind"] == "vllm" and obj["status"] == "ok"
        assert obj["model"] == host.shape.model and obj["engine_index"] == "0"
        assert obj["error"] is None and obj["sleeping"] is False and obj["window_ms"] == 10_000
        assert snapshot["timestamp_ms"] - 5 <= obj["scraped_at_ms"] < snapshot["timestamp_ms"]
        assert 0.0 <= obj["kv_cache_usage_ratio"] <= 1.0
        assert obj["kv_cache_capacity_tokens"] % 16 == 0  # blocks of 16 tokens
        assert 0 <= obj["requests_running"] <= host.engine.ranks[0].max_num_seqs
    # Deltas need two scrapes: none on the first, every one once requests finish.
    assert all(objects[0][key] is None for key in WINDOWED)
    assert objects[0]["requests_running"] is not None
    assert all(obj[key] is not None for obj in objects[30:] for key in WINDOWED)
    assert all(0.0 <= obj["prefix_cache_hit_ratio"] <= 1.0 for obj in objects[1:])


def test_waiting_grows_while_arrivals_exceed_what_it_serves_and_drains_after():
    engine = SimulatedEngine(3, 0, "m", 2, QUIET)
    [rank] = engine.ranks
    overload = drive(engine, 120, load=3.0)
    waiting = [obj["requests_waiting"] for obj in overload]
    running = [obj["requests_running"] for obj in overload]

    assert 0 < waiting[29] < waiting[59] < waiting[119]
    assert max(running) == rank.max_num_seqs and all(count <= rank.max_num_seqs for count in running)
    calm = drive(engine, 900, load=0.3, start_ms=T0_MS + 120_000)
    waiting = [obj["requests_waiting"] for obj in calm]
    assert waiting[-1] == 0 and max(waiting[-60:]) == 0
    assert statistics.fmean(obj["requests_running"] for obj in calm[-300:]) < rank.max_num_seqs


def test_time_to_first_token_grows_with_the_queue():
    light = drive(SimulatedEngine(4, 0, "m", 4, QUIET), 120, load=0.2)
    busy = drive(SimulatedEngine(4, 0, "m", 4, QUIET), 120, load=3.0)

    light_p50 = statistics.fmean(obj["ttft_p50_s"] for obj in light[30:] if obj["ttft_p50_s"] is not None)
    busy_p50 = [obj["ttft_p50_s"] for obj in busy[30:]]
    assert light_p50 < 1.0
    assert min(busy_p50) > 5 * light_p50 and busy_p50[-1] > busy_p50[0]
    assert all(obj["ttft_p95_s"] >= obj["ttft_p50_s"] for obj in busy[30:])


def test_kv_usage_follows_the_running_requests_and_their_lengths():
    engine = SimulatedEngine(5, 0, "m", 2, QUIET)
    [rank] = engine.ranks
    objects = []
    for load, seconds in ((0.1, 120), (0.6, 120), (2.5, 120), (0.0, 600)):
        objects += drive(engine, seconds, load, start_ms=T0_MS + len(objects) * 1000)
        # The cache holds each running request's prompt and what it generated so far.
        held = sum(prompt + generated for prompt, _, generated, *_ in rank.running)
        assert engine.objects(T0_MS + len(objects) * 1000)[0]["kv_cache_usage_ratio"] == pytest.approx(
            min(1.0, held / rank.capacity_tokens), abs=1e-4)

    full = [obj["kv_cache_usage_ratio"] for obj in objects if obj["requests_running"] == rank.max_num_seqs]
    few = [obj["kv_cache_usage_ratio"] for obj in objects if 0 < obj["requests_running"] <= rank.max_num_seqs // 4]
    assert full and few and statistics.fmean(full) > 2 * statistics.fmean(few)
    assert objects[-1]["requests_running"] == 0 and objects[-1]["kv_cache_usage_ratio"] == 0.0
    assert max(obj["kv_cache_usage_ratio"] for obj in objects) <= 1.0


def test_an_overfull_cache_preempts_requests_as_vllm_does():
    preempted = 0
    for seed in range(6):
        engine = SimulatedEngine(seed, 0, "m", 1, QUIET)
        preempted += sum(obj["preemptions"] or 0 for obj in drive(engine, 300, load=3.0)[::10])
        [rank] = engine.ranks
        assert rank.kv_used <= rank.capacity_tokens or len(rank.running) == 1
    assert preempted > 0


def test_a_share_of_engines_fail_with_every_figure_null_and_the_host_rejecting():
    profile = FleetProfile(engine_fault_share=0.2, engine_fault_mean_s=10.0, unhealthy_gpu_share=0.0)
    hosts = build_fleet(range(150), 150, seed=6, profile=profile)
    seen = [(host, obj) for host, obj in engine_objects(hosts, 40)]
    failed = [obj for _, obj in seen if obj["status"] != "ok"]

    assert len(seen) > 5000
    assert len(failed) / len(seen) == pytest.approx(0.2, abs=0.03)
    assert {obj["status"] for obj in failed} == FAILED
    for obj in failed:
        assert all(obj[key] is None for key in FIGURES) and obj["lora"] is None and obj["sleeping"] is None
        assert obj["error"] and obj["url"] == ENGINE_URL
    assert all(obj["scrape_ms"] is None for obj in failed if obj["status"] == "timeout")
    # One engine a host: none ok rejects, named by the status.
    for number in range(3):
        for host in hosts:
            snapshot = host.snapshot(T0_MS + (40 + number) * 1000)
            status = snapshot["engines"][0]["status"]
            hint = snapshot["capacity_hint"]
            if status != "ok":
                assert hint["admission_state"] == "rejecting" and f"engine_{status}" in hint["admission_reasons"]


def test_an_engine_that_was_unreachable_comes_back_restarted():
    profile = FleetProfile(engine_fault_share=0.3, engine_fault_mean_s=5.0)
    back = []
    for host in build_fleet(range(40), 40, seed=7, profile=profile):
        served, down = False, False  # counters above zero at the last ok scrape; unreachable at the last
        for number in range(60):
            obj = host.snapshot(T0_MS + number * 1000)["engines"][0]
            if obj["status"] == "ok":
                if down and served:
                    back.append(obj)
                served = bool(obj["generation_tokens_per_s"])
            down = obj["status"] == "unreachable"

    assert len(back) >= 3
    # A new vLLM process: its counters start from zero, below the last scrape's, so the agent's window starts again.
    assert all(obj[key] is None for obj in back for key in WINDOWED)
    assert all(obj["requests_running"] is not None for obj in back)


def test_a_restarted_agent_starts_new_windows_on_an_engine_that_ran_on():
    host = SimulatedHost(8, seed=8, profile=FleetProfile.calm(gpu_counts=(2,), engine_fault_share=0.0))
    before = [host.snapshot(T0_MS + i * 1000)["engines"][0] for i in range(30)]
    host.restart()
    first, second = (host.snapshot(T0_MS + i * 1000)["engines"][0] for i in (30, 31))

    assert before[-1]["generation_tokens_per_s"] is not None
    assert all(first[key] is None for key in WINDOWED) and first["requests_running"] is not None
    assert second["generation_tokens_per_s"] is not None


def test_a_share_of_the_large_hosts_run_two_data_parallel_engines_behind_one_url():
    hosts = build_fleet(range(120), 120, seed=14, profile=FleetProfile(gpu_counts=(8,), capabilities_share=1.0,
                                                                       engine_fault_share=0.0))
    parallel = [host for host in hosts if len(host.engine.ranks) == 2]

    assert len(parallel) / len(hosts) == pytest.approx(0.25, abs=0.1)
    for host in parallel:
        assert host.capabilities["parallelism"]["tensor_parallel_size"] == 4
        assert host.capabilities["parallelism"]["data_parallel_size"] == 2
        assert all(rank.max_num_seqs == 4 * host.engine.seqs_per_gpu for rank in host.engine.ranks)
    host = parallel[0]
    snapshots = [host.snapshot(T0_MS + i * 1000) for i in range(120)]
    for snapshot in snapshots:
        engines = snapshot["engines"]
        assert [(obj["url"], obj["model"], obj["engine_index"]) for obj in engines] == [
            (ENGINE_URL, host.shape.model, "0"), (ENGINE_URL, host.shape.model, "1")]
    # The server sends each request to the engine holding fewer: they stay within a few of each other.
    held = [[obj["requests_running"] + obj["requests_waiting"] for obj in snapshot["engines"]]
            for snapshot in snapshots]
    assert all(abs(one - other) <= 3 for one, other in held)
    assert statistics.fmean(one for one, _ in held) > 1
    # A failed scrape: both engines, every figure null.
    host.engine.fault = "timeout"
    failed = host.snapshot(T0_MS + 120_000)["engines"]
    assert [(obj["engine_index"], obj["status"], obj["requests_running"]) for obj in failed] == [
        ("0", "timeout", None), ("1", "timeout", None)]


def test_its_time_is_the_callers():
    apart, close = SimulatedEngine(9, 0, "m", 2, QUIET), SimulatedEngine(9, 0, "m", 2, QUIET)
    for step in range(3):
        apart.advance(T0_MS + step * 60_000, 3.0)  # a minute between snapshots (a stale spell)
        close.advance(T0_MS + step * 1000, 3.0)
    assert apart.requests_waiting > 10 * max(1, close.requests_waiting)

    gauges = ("requests_running", "requests_waiting", "kv_cache_usage_ratio")
    now = apart.objects(T0_MS + 120_000)[0]
    apart.advance(T0_MS + 120_000, 3.0)  # no time passed: nothing happened
    assert [apart.objects(T0_MS + 120_000)[0][key] for key in gauges] == [now[key] for key in gauges]


def test_it_is_the_same_engine_for_the_same_seed_and_another_for_another():
    def objects(seed):
        return [obj for _, obj in engine_objects(build_fleet(range(10), 10, seed=seed), 30)]

    assert objects(10) == objects(10)
    assert objects(10) != objects(11)


def test_turning_engines_off_leaves_the_rest_of_each_snapshot_as_it_was_but_the_gpus_load():
    with_engines = build_fleet(range(30), 30, seed=12)
    without = build_fleet(range(30), 30, seed=12, profile=FleetProfile(engines=False))
    busier = 0
    for number in range(20):
        for one, other in zip(with_engines, without):
            snapshot, plain = one.snapshot(T0_MS + number * 1000), other.snapshot(T0_MS + number * 1000)
            assert "engines" not in plain
            assert ("engines" in snapshot) == bool(one.shape.gpu_count)
            devices, plain_devices = dict(snapshot["devices"]), dict(plain["devices"])
            gpus, plain_gpus = devices.pop("gpu"), plain_devices.pop("gpu")
            assert devices == plain_devices
            assert {k: v for k, v in snapshot.items() if k not in ("engines", "capacity_hint", "devices")} == {
                k: v for k, v in plain.items() if k not in ("capacity_hint", "devices")}
            assert [(gpu["uuid"], gpu["memory_used_mb"]) for gpu in gpus] == [
                (gpu["uuid"], gpu["memory_used_mb"]) for gpu in plain_gpus]
            # Its GPUs are at least as busy as the host's load makes them, busier while the batch is full.
            for gpu, plain_gpu in zip(gpus, plain_gpus):
                if gpu["utilization_pct_current"] is not None and plain_gpu["utilization_pct_current"] is not None:
                    assert gpu["utilization_pct_current"] >= plain_gpu["utilization_pct_current"]
                    busier += gpu["utilization_pct_current"] > plain_gpu["utilization_pct_current"]
    assert busier > 0


def test_its_gpus_are_busy_while_its_batch_is_full():
    host = SimulatedHost(15, seed=15, profile=FleetProfile(gpu_counts=(2,), unhealthy_gpu_share=0.0,
                                                           engine_fault_share=0.0))
    host.load_mean = host.load = 0.3
    host.engine.burst_left_s, host.engine.burst_factor = 600.0, 6.0  # a long burst: a full batch
    snapshots = [host.snapshot(T0_MS + i * 1000) for i in range(60)]

    assert all(snapshot["engines"][0]["requests_waiting"] > 0 for snapshot in snapshots[30:])
    assert min(gpu["utilization_pct_avg"] for snapshot in snapshots[30:] for gpu in snapshot["devices"]["gpu"]) > 75


def test_a_host_without_gpus_runs_no_engine():
    host = SimulatedHost(0, profile=FleetProfile(gpu_counts=(0,)))
    assert host.engine is None and "engines" not in host.snapshot(T0_MS)


def test_a_fleet_shows_moving_queues_and_every_admission_reason_of_its_engines():
    hosts = build_fleet(range(50), 50, seed=13, profile=FleetProfile(engine_bursts_per_hour=12.0))
    by_host, reasons = {}, set()
    for number in range(200):
        for host in hosts:
            snapshot = host.snapshot(T0_MS + number * 1000)
            hint = snapshot["capacity_hint"]
            reasons |= {reason.split("=")[0].split(":")[-1] for reason in hint["admission_reasons"]}
            by_host.setdefault(host.index, []).extend(
                obj["requests_waiting"] for obj in snapshot.get("engines", []) if obj["status"] == "ok")
    waiting = [count for counts in by_host.values() for count in counts]

    assert 0.05 < sum(count > 0 for count in waiting) / len(waiting) < 0.4  # queues somewhere, not everywhere
    assert max(waiting) >= 32
    # Queues that rose and fell again.
    assert sum(1 for counts in by_host.values() if counts and max(counts) > 5 and counts[-1] < max(counts) / 2) >= 3
    assert sum(host.engine.bursts for host in hosts if host.engine) > 0
    assert {"kv_cache_usage_ratio", "requests_waiting"} <= reasons
    assert any(reason.startswith("engine_") for reason in reasons)  # no engine ok: rejecting


def test_its_command_line_turns_engines_off_and_sets_their_faults_and_bursts():
    parser = argparse.ArgumentParser()
    add_arguments(parser)

    default = run_config(vars(parser.parse_args([]))).profile
    assert default.engines is True and default.engine_fault_share == 0.02
    profile = run_config(vars(parser.parse_args(["--no-engines", "--engine-faults", "0.1",
                                                 "--engine-bursts-per-hour", "12"]))).profile
    assert (profile.engines, profile.engine_fault_share, profile.engine_bursts_per_hour) == (False, 0.1, 12.0)
    with pytest.raises(SystemExit):
        parser.parse_args(["--engine-faults", "1.5"])

"""The fleet simulator's model: snapshots as the agent sends them, churn at the seeded rates.

No network and no clock: every wall time is passed in, and every random
choice comes from the seed, so each figure below is the same on every run.
"""

import statistics

import pytest

from agent.capabilities import fingerprint, parse_capabilities
from proxy_app.ingest.normalise import normalise_snapshot
from simulator.model import FleetProfile, Round, SimulatedHost, build_fleet, per_round
from simulator.schedule import first_slot_ms, ramp_rounds, slot_offset_ms
from tests.factories import T0, T0_MS

INTERVAL_MS = 1000


def run_rounds(hosts, rounds, interval_ms=INTERVAL_MS):
    """Drive hosts as the driver does; yields (round number, host, kind, report body or None)."""
    for number in range(rounds):
        wall_ms = T0_MS + number * interval_ms
        for host in hosts:
            kind = host.next_round()
            body = None if kind is Round.SILENT else host.report_body(wall_ms)
            yield number, host, kind, body


def reports(hosts, rounds, interval_ms=INTERVAL_MS):
    return [body for _, _, _, body in run_rounds(hosts, rounds, interval_ms) if body is not None]


def test_it_writes_every_field_of_the_agents_snapshot_in_the_agents_order(agent_snapshot):
    [body] = reports([SimulatedHost(0, seed=1, profile=FleetProfile(gpu_counts=(2,)))], rounds=1)
    snapshot = body["snapshot"]

    assert list(snapshot) == list(agent_snapshot)
    assert list(snapshot["devices"]) == list(agent_snapshot["devices"])
    for part in ("cpu", "memory"):
        assert list(snapshot["devices"][part]) == list(agent_snapshot["devices"][part])
    for part in ("network", "disk"):
        assert list(snapshot["devices"][part][0]) == list(agent_snapshot["devices"][part][0])
    assert list(snapshot["devices"]["gpu"][0]) == list(agent_snapshot["devices"]["gpu"][0])
    assert list(snapshot["capacity_hint"]) == list(agent_snapshot["capacity_hint"])
    assert snapshot["schema_version"] == "resource_snapshot_v1"


def test_it_sends_the_reporters_body_and_metadata():
    host = SimulatedHost(3, seed=1)
    body = host.report_body(T0_MS)

    assert list(body) == ["instance_id", "snapshot", "metadata"]
    assert body["instance_id"] == body["snapshot"]["instance_id"] == "sim-00003"
    assert body["metadata"] == {
        "reported_instance_id": "sim-00003",
        "report_monotonic_ms": host.uptime_ms,
        "report_wall_time_ms": T0_MS,
        "agent_snapshot_timestamp_ms": body["snapshot"]["timestamp_ms"],
        "report_seq": 1,
    }
    assert T0_MS - 1000 < body["snapshot"]["timestamp_ms"] <= T0_MS
    later = host.report_body(T0_MS + 1000)["metadata"]
    assert later["report_seq"] == 2
    assert later["report_monotonic_ms"] == host.uptime_ms + 1000


def spec_admission(snapshot):
    """SPEC 2.2's rule with SPEC 13's engine rules, written out again here from the SPEC's words."""
    memory, cpu = snapshot["devices"]["memory"], snapshot["devices"]["cpu"]
    gpus = snapshot["devices"]["gpu"]
    engines = snapshot.get("engines", [])
    ok_engines = [engine for engine in engines if engine["status"] == "ok"]
    if (memory["free_mb"] / memory["total_mb"] < 0.05 or any(gpu["health"] == "error" for gpu in gpus)
            or (engines and not ok_engines)):
        return "rejecting"
    gpu_memory_full = any(gpu["memory_used_mb"] is not None and gpu["memory_used_mb"] / gpu["memory_total_mb"] > 0.97
                          for gpu in gpus)
    cpu_busy = cpu["utilization_pct"] is not None and cpu["utilization_pct"] > 95
    engine_full = any(engine["kv_cache_usage_ratio"] >= 0.95 or engine["requests_waiting"] >= 32
                      for engine in ok_engines)
    if cpu_busy or gpu_memory_full or engine_full or any(gpu["health"] == "degraded" for gpu in gpus):
        return "degraded"
    return "accepting"


def test_it_follows_the_admission_rules_and_shows_every_state():
    bodies = reports(build_fleet(range(200), 200, seed=2), rounds=10)
    states = [body["snapshot"]["capacity_hint"]["admission_state"] for body in bodies]

    assert states == [spec_admission(body["snapshot"]) for body in bodies]
    assert set(states) == {"accepting", "degraded", "rejecting"}
    assert states.count("accepting") > len(states) / 2  # a fleet mostly at work


def test_the_proxy_normalises_its_snapshots_to_the_figures_they_carry():
    for body in reports(build_fleet(range(60), 60, seed=3), rounds=8):
        snapshot, metadata = body["snapshot"], body["metadata"]
        columns = normalise_snapshot(snapshot, metadata, T0)
        devices = snapshot["devices"]
        gpus = devices["gpu"]
        valid = [gpu for gpu in gpus if gpu["utilization_sample_ok"]]
        averages = [gpu["utilization_pct_avg"] for gpu in valid if gpu["utilization_pct_avg"] is not None]

        assert columns["cpu_util"] == devices["cpu"]["utilization_pct"]
        assert columns["memory_used_mb"] == devices["memory"]["used_mb"]
        assert columns["memory_total_mb"] == devices["memory"]["total_mb"]
        assert columns["memory_free_ratio"] == snapshot["capacity_hint"]["memory_free_ratio"]
        assert columns["gpu_count"] == len(valid)
        assert columns["gpu_util_avg"] == (pytest.approx(statistics.fmean(averages)) if averages else None)
        assert columns["gpu_mem_total_mb"] == pytest.approx(
            sum(gpu["memory_total_mb"] for gpu in gpus if gpu["memory_total_mb"] is not None))
        assert columns["gpu_sample_source"] == "nvml"
        assert columns["gpu_sample_window_ms"] == INTERVAL_MS * 5
        assert columns["network_rx_mbps"] == devices["network"][0]["rx_mbps"]
        assert columns["admission_state"] == snapshot["capacity_hint"]["admission_state"]
        assert columns["resource_ts_ms"] == snapshot["timestamp_ms"]
        assert columns["report_seq"] == metadata["report_seq"]
        assert columns["reported_instance_id"] == body["instance_id"]
        # SPEC 13's columns: sums and maxima over the ok engines; none without engines.
        engines = snapshot.get("engines", [])
        ok = [engine for engine in engines if engine["status"] == "ok"]
        assert columns["engine_count"] == (len(engines) if "engines" in snapshot else None)
        assert columns["requests_waiting"] == (sum(engine["requests_waiting"] for engine in ok) if ok else None)
        assert columns["requests_running"] == (sum(engine["requests_running"] for engine in ok) if ok else None)
        assert columns["kv_cache_usage_ratio"] == (max(engine["kv_cache_usage_ratio"] for engine in ok) if ok else None)
        if engines:
            newest = max(engine["scraped_at_ms"] for engine in engines)
            assert columns["engine_sample_age_ms"] == snapshot["timestamp_ms"] - newest
            served = {entry["id"] for engine in engines for entry in engine.get("served") or () if not entry["parent"]}
            assert columns["engine_models"] == sorted({engine["model"] for engine in engines if engine["model"]}
                                                      | served)


def test_its_unhealthy_gpus_say_why_and_some_give_no_valid_sample():
    rows = [gpu for body in reports(build_fleet(range(100), 100, seed=4,
                                                profile=FleetProfile(unhealthy_gpu_share=0.2)), rounds=10)
            for gpu in body["snapshot"]["devices"]["gpu"]]
    unhealthy = [gpu for gpu in rows if gpu["health"] != "ok"]

    assert {gpu["health"] for gpu in unhealthy} == {"degraded", "error"}
    assert all(gpu["health_reasons"] for gpu in unhealthy)
    assert all(gpu["health_reasons"] == [] for gpu in rows if gpu["health"] == "ok")
    invalid = [gpu for gpu in rows if not gpu["utilization_sample_ok"]]
    assert invalid and all(gpu["health"] != "ok" for gpu in invalid)
    assert all(gpu["utilization_sample_quality"] == "error" and gpu["utilization_error"] for gpu in invalid)
    lost = [gpu for gpu in invalid if gpu["health_reasons"] == ["gpu_lost"]]
    assert lost and all(gpu["memory_used_mb"] is None and gpu["temperature_c"] is None for gpu in lost)


def test_its_gpu_rows_carry_spec_13s_hardware_events_in_the_agents_order(agent_snapshot):
    hosts = build_fleet(range(100), 100, seed=4, profile=FleetProfile(unhealthy_gpu_share=0.3))
    rows = [gpu for body in reports(hosts, rounds=10) for gpu in body["snapshot"]["devices"]["gpu"]]
    order = list(agent_snapshot["devices"]["gpu"][0])

    assert all(list(gpu) == order for gpu in rows)
    xids = [gpu for gpu in rows if any(reason.startswith("xid_") for reason in gpu["health_reasons"])]
    assert xids and all(gpu["health"] == "error" and f"xid_{gpu['xid_last']}" in gpu["health_reasons"]
                        and gpu["xid_count"] >= 1 for gpu in xids)
    remaps = [gpu for gpu in rows if "row_remap_failure" in gpu["health_reasons"]]
    assert remaps and all(gpu["health"] == "error" and gpu["remapped_rows_failure"] is True for gpu in remaps)
    slow = [gpu for gpu in rows if gpu["health_reasons"] == ["nvml_slow"]]
    assert slow and all(gpu["health"] == "degraded" and gpu["utilization_error"] == "nvml_slow"
                        and gpu["memory_used_mb"] is None and gpu["xid_count"] is not None for gpu in slow)
    readable = [gpu for gpu in rows if gpu["memory_used_mb"] is not None]
    assert {gpu["remapped_rows_failure"] for gpu in readable} == {False, True}
    assert all(isinstance(gpu["xid_count"], int) for gpu in rows)
    # A new agent process has seen no XID yet.
    host = next(host for host in hosts if any(gpu.xid_count for gpu in host.gpus))
    host.restart()
    rows = host.report_body(T0_MS + 10_000)["snapshot"]["devices"]["gpu"]
    assert {gpu["xid_count"] for gpu in rows} == {0} and {gpu["xid_last"] for gpu in rows} == {None}
    assert not any(reason.startswith("xid_") for gpu in rows for reason in gpu["health_reasons"])


def test_it_keeps_the_seeded_share_of_gpus_unhealthy():
    profile = FleetProfile(unhealthy_gpu_share=0.2, gpu_fault_mean_s=10.0)
    rows = [gpu for body in reports(build_fleet(range(150), 150, seed=5, profile=profile), rounds=40)
            for gpu in body["snapshot"]["devices"]["gpu"]]
    share = sum(gpu["health"] != "ok" for gpu in rows) / len(rows)

    assert len(rows) > 10_000
    assert share == pytest.approx(0.2, abs=0.02)


def test_a_healthy_fleet_has_no_unhealthy_gpus():
    rows = [gpu for body in reports(build_fleet(range(50), 50, seed=5, profile=FleetProfile(unhealthy_gpu_share=0.0)),
                                    rounds=20)
            for gpu in body["snapshot"]["devices"]["gpu"]]
    assert {gpu["health"] for gpu in rows} == {"ok"}


def test_it_starts_stale_spells_at_the_seeded_rate_and_comes_back():
    profile = FleetProfile.calm(stale_per_hour=360.0, stale_spell_s=(3.0, 6.0))  # 0.1 per reporting slot
    hosts = build_fleet(range(200), 200, seed=6, profile=profile)
    deciding, silences, current = 0, [], {}
    for _, host, kind, _ in run_rounds(hosts, 60):
        if host.index not in current:
            deciding += 1
        if kind is Round.SILENT:
            current[host.index] = current.get(host.index, 0) + 1
        elif host.index in current:
            silences.append(current.pop(host.index))

    spells = sum(host.stale_spells for host in hosts)
    assert spells / deciding == pytest.approx(per_round(360.0, INTERVAL_MS), rel=0.1)
    assert len(silences) > 0.8 * spells  # nearly all of them ended within the run
    assert set(silences) <= {3, 4, 5, 6}  # a spell lasts what the profile says, in slots


def test_it_restarts_hosts_at_the_seeded_rate_with_report_seq_from_one():
    profile = FleetProfile.calm(restarts_per_hour=180.0)  # 0.05 per slot
    hosts = build_fleet(range(200), 200, seed=7, profile=profile)
    last = {}
    restarts = 0
    for _, host, kind, body in run_rounds(hosts, 50):
        metadata = body["metadata"]
        if kind is Round.RESTART:
            restarts += 1
            assert metadata["report_seq"] == 1
            if host.index in last:
                assert metadata["report_wall_time_ms"] > last[host.index]["report_wall_time_ms"]
            # A new agent process: no rates before its second sample, an empty utilisation window.
            assert body["snapshot"]["devices"]["cpu"]["utilization_pct"] is None
            assert body["snapshot"]["devices"]["network"][0]["rx_mbps"] is None
            assert {gpu["utilization_sample_count"] for gpu in body["snapshot"]["devices"]["gpu"]} <= {0, 1}
        elif host.index in last:
            assert metadata["report_seq"] == last[host.index]["report_seq"] + 1
        last[host.index] = metadata

    assert restarts == sum(host.restarts for host in hosts)
    assert restarts / (200 * 50) == pytest.approx(0.05, rel=0.15)


def test_a_calm_fleet_reports_every_slot():
    kinds = {kind for _, _, kind, _ in run_rounds(build_fleet(range(50), 50, profile=FleetProfile.calm()), 30)}
    assert kinds == {Round.REPORT}


def test_its_first_snapshot_has_no_rates_and_the_next_ones_do():
    host = SimulatedHost(0, seed=8)
    first, second = host.snapshot(T0_MS), host.snapshot(T0_MS + 1000)

    assert first["devices"]["cpu"]["utilization_pct"] is None
    assert first["devices"]["cpu"]["per_core_pct"] is None
    assert {entry["rx_mbps"] for entry in first["devices"]["network"]} == {None}
    assert 0.0 <= second["devices"]["cpu"]["utilization_pct"] <= 100.0
    assert len(second["devices"]["cpu"]["per_core_pct"]) == second["devices"]["cpu"]["count_logical"]
    assert all(entry["rx_mbps"] >= 0.0 for entry in second["devices"]["network"])


def test_its_figures_drift_smoothly_but_do_drift():
    host = SimulatedHost(1, seed=9, profile=FleetProfile(gpu_counts=(8,), unhealthy_gpu_share=0.0))
    snapshots = [host.snapshot(T0_MS + i * 1000) for i in range(120)]
    averages = [gpu["utilization_pct_avg"] for snapshot in snapshots for gpu in snapshot["devices"]["gpu"][:1]]
    temperatures = [snapshot["devices"]["gpu"][0]["temperature_c"] for snapshot in snapshots]
    memory = [snapshot["devices"]["memory"]["used_mb"] for snapshot in snapshots]

    assert max(abs(b - a) for a, b in zip(averages, averages[1:])) < 10.0
    assert max(abs(b - a) for a, b in zip(temperatures[10:], temperatures[11:])) <= 5
    assert max(averages) - min(averages) > 5.0
    assert len(set(temperatures)) > 3 and len(set(memory)) > 10


def test_it_is_the_same_fleet_for_the_same_seed_whichever_process_builds_a_host():
    whole = reports(build_fleet(range(20), 20, seed=10), rounds=15)
    again = reports(build_fleet(range(20), 20, seed=10), rounds=15)
    alone = reports(build_fleet([7], 20, seed=10), rounds=15)
    other_seed = reports(build_fleet(range(20), 20, seed=11), rounds=15)

    assert whole == again
    assert alone == [body for body in whole if body["instance_id"] == "sim-00007"]
    assert whole != other_seed


def test_it_builds_hosts_of_the_asked_sizes():
    hosts = build_fleet(range(100), 100, seed=12, profile=FleetProfile(gpu_counts=(2, 8)))
    sizes = [len(host.snapshot(T0_MS)["devices"]["gpu"]) for host in hosts]
    assert set(sizes) == {2, 8}
    names = {gpu.kind.name for host in hosts for gpu in host.gpus}
    assert names == {"NVIDIA A10G", "NVIDIA H100 80GB HBM3"}


def test_a_host_without_gpus_says_so():
    snapshot = SimulatedHost(0, profile=FleetProfile(gpu_counts=(0,))).snapshot(T0_MS)
    assert snapshot["devices"]["gpu"] == []
    assert snapshot["gpu_status"] == "no_gpu"


def test_its_typed_capabilities_are_what_the_proxy_accepts_at_the_seeded_share():
    hosts = build_fleet(range(400), 400, seed=13, profile=FleetProfile(capabilities_share=0.25))
    with_capabilities = [host for host in hosts if host.capabilities is not None]

    assert len(with_capabilities) / len(hosts) == pytest.approx(0.25, abs=0.05)
    for host in with_capabilities:
        canonical = parse_capabilities(host.register_body()["capabilities"])
        assert fingerprint(canonical) == host.capability_fingerprint
        parallelism = canonical["parallelism"]  # every GPU, some hosts' in two data-parallel engines
        data_parallel = parallelism.get("data_parallel_size") or 1
        assert parallelism["tensor_parallel_size"] * data_parallel == host.shape.gpu_count
        assert host.heartbeat_body()["capability_fingerprint"] == host.capability_fingerprint
        assert host.heartbeat_body(with_capabilities=True)["capabilities"] == host.capabilities
    plain = next(host for host in hosts if host.capabilities is None)
    assert "capabilities" not in plain.register_body()
    assert "capability_fingerprint" not in plain.heartbeat_body()


def test_it_registers_with_the_proxys_fields():
    host = SimulatedHost(258, seed=14)
    body = host.register_body()
    assert body["instance_id"] == "sim-00258"
    assert body["host"] == "10.64.1.2" and body["port"] == 8000
    assert body["meta"]["simulated"] is True
    assert len(body["meta"]["gpu_names"]) == host.shape.gpu_count
    assert body["weight"] == float(host.shape.gpu_count)


def test_it_spreads_report_slots_evenly_over_the_interval():
    assert [slot_offset_ms(i, 4, 1000) for i in range(4)] == [0, 250, 500, 750]
    assert slot_offset_ms(1999, 2000, 1000) == pytest.approx(999.5)


def test_it_starts_a_large_fleet_over_a_ramp_an_even_share_each_interval():
    rounds = ramp_rounds(2.5, 1000)
    starts = [first_slot_ms(i, 12, 1000, rounds) for i in range(12)]
    by_interval = [sorted(start % 1000 for start in starts if start // 1000 == k) for k in range(rounds)]

    assert rounds == 3
    assert [len(share) for share in by_interval] == [4, 4, 4]
    # Each interval's starters are spread over the whole interval, not bunched at its start.
    assert all(share[-1] - share[0] >= 500 for share in by_interval)
    assert [first_slot_ms(i, 12, 1000) for i in range(3)] == [slot_offset_ms(i, 12, 1000) for i in range(3)]
    assert ramp_rounds(0, 1000) == 1


def test_its_instance_ids_are_as_wide_as_the_fleet_needs():
    assert build_fleet([0], 10)[0].instance_id == "sim-00000"
    assert build_fleet([5], 1_000_000, id_prefix="load")[0].instance_id == "load-000005"

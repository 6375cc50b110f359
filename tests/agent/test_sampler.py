"""Host measurements: rates over the last interval, null before there is one."""

from agent.sampler import (
    HostSampler,
    cpu_usage,
    default_route_interface,
    order_interfaces,
    rate_mbps,
)
from tests.agent.conftest import GIB, DiskUsage, cpu_times

ROUTE_HEADER = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"


def test_it_takes_cpu_busy_as_busy_time_over_elapsed_time():
    assert cpu_usage([cpu_times(busy=10, idle=90)], [cpu_times(busy=40, idle=160)]) == (30.0, [30.0])


def test_it_counts_iowait_as_idle_and_guest_time_once():
    before = [cpu_times(busy=0, idle=0)]
    # user holds 1 s of own work plus 1 s of guest time; with 1 s iowait and
    # 1 s idle that is 2 busy seconds out of 4, not 3 out of 5.
    after = [cpu_times(busy=1, guest=1, idle=1, iowait=1)]
    assert cpu_usage(before, after) == (50.0, [50.0])


def test_it_gives_a_null_cpu_rate_without_a_previous_reading_or_elapsed_time():
    assert cpu_usage(None, [cpu_times(busy=1, idle=1)]) == (None, None)
    same = [cpu_times(busy=5, idle=5)]
    assert cpu_usage(same, same) == (None, None)


def test_it_weighs_cores_by_their_time_in_the_host_cpu_total():
    before = [cpu_times(busy=0, idle=0), cpu_times(busy=0, idle=0)]
    after = [cpu_times(busy=1, idle=0), cpu_times(busy=0, idle=1)]
    assert cpu_usage(before, after) == (50.0, [100.0, 0.0])


def test_it_gives_null_cpu_usage_when_cores_do_not_pair_up():
    assert cpu_usage(None, [cpu_times(idle=1)]) == (None, None)
    assert cpu_usage([cpu_times(idle=1)], [cpu_times(idle=2), cpu_times(idle=2)]) == (None, None)


def test_it_gives_network_rates_in_megabits_per_second():
    # 1,250,000 bytes in 1 s = 10 Mbit/s
    assert rate_mbps(0, 1_250_000, 1000) == 10.0
    assert rate_mbps(0, 1_250_000, 500) == 20.0


def test_it_gives_a_null_network_rate_for_a_first_sample_or_a_counter_reset():
    assert rate_mbps(None, 100, 1000) is None
    assert rate_mbps(500, 100, 1000) is None
    assert rate_mbps(100, 200, 0) is None


def test_it_reads_the_default_route_from_proc_net_route_lowest_metric_first():
    routes = ROUTE_HEADER + (
        "eth0\t00000000\t010200C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n"
        "eth1\t00000000\t010300C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
        "eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
    )
    assert default_route_interface(routes) == "eth1"


def test_it_falls_back_to_the_ipv6_default_route():
    ipv6 = (
        "fe800000000000000000000000000000 40 00000000000000000000000000000000 00 "
        "00000000000000000000000000000000 00000100 00000001 00000000 00000001 eth0\n"
        "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
        "fe800000000000000000000000000001 00000400 00000001 00000000 00000003 ens5\n"
    )
    assert default_route_interface(ROUTE_HEADER, ipv6) == "ens5"
    assert default_route_interface(None, None) is None


def test_it_puts_the_default_route_interface_first():
    assert order_interfaces(["eth0", "docker0", "ib0"], "ib0") == ["ib0", "docker0", "eth0"]
    assert order_interfaces(["eth1", "eth0"], None) == ["eth0", "eth1"]


def test_it_gives_a_first_sample_null_rates_and_real_levels(source, clock):
    devices = HostSampler(source, clock.ms).sample()
    cpu = devices["cpu"]
    assert cpu["utilization_pct"] is None and cpu["per_core_pct"] is None
    assert (cpu["load1"], cpu["load5"], cpu["load15"]) == (0.5, 0.25, 0.12)
    assert (cpu["count_logical"], cpu["count_physical"]) == (2, 1)
    assert all(entry["rx_mbps"] is None and entry["tx_mbps"] is None for entry in devices["network"])


def test_it_gives_the_second_sample_rates_over_the_interval(source, clock):
    sampler = HostSampler(source, clock.ms)
    sampler.sample()
    source.add_cpu(busy=0.75, idle=0.25)
    source.add_net("eth0", rx=2_500_000, tx=125_000)
    clock.advance(2000)
    devices = sampler.sample()
    assert devices["cpu"]["utilization_pct"] == 75.0
    assert devices["cpu"]["per_core_pct"] == [75.0, 75.0]
    eth0 = next(entry for entry in devices["network"] if entry["iface"] == "eth0")
    assert (eth0["rx_mbps"], eth0["tx_mbps"]) == (10.0, 0.5)
    assert (eth0["rx_bytes_total"], eth0["tx_bytes_total"]) == (2_500_000, 125_000)
    ib0 = next(entry for entry in devices["network"] if entry["iface"] == "ib0")
    assert (ib0["rx_mbps"], ib0["tx_mbps"]) == (0.0, 0.0)


def test_it_lists_non_loopback_interfaces_default_route_first(source, clock):
    network = HostSampler(source, clock.ms).sample()["network"]
    assert [entry["iface"] for entry in network] == ["ib0", "eth0"]
    speeds = {entry["iface"]: entry["speed_mbps"] for entry in network}
    assert speeds == {"ib0": None, "eth0": 25000}  # psutil's 0 means "unknown"


def test_it_reports_available_memory_in_mib_as_free(source, clock):
    memory = HostSampler(source, clock.ms).sample()["memory"]
    assert memory == {"used_mb": 4096.0, "total_mb": 16384.0, "free_mb": 12288.0,
                      "swap_used_mb": 512.0, "swap_total_mb": 2048.0}


def test_it_reports_configured_mounts_and_nulls_a_missing_one(source, clock):
    source.disks["/models"] = DiskUsage(total=2000 * GIB, used=1500 * GIB, free=500 * GIB, percent=75.0)
    disk = HostSampler(source, clock.ms, mounts=("/", "/models", "/gone")).sample()["disk"]
    assert disk == [
        {"mount": "/", "used_gb": 125.0, "total_gb": 500.0},
        {"mount": "/models", "used_gb": 1500.0, "total_gb": 2000.0},
        {"mount": "/gone", "used_gb": None, "total_gb": None},
    ]


def test_it_reads_slow_facts_every_thirty_seconds_not_every_sample(source, clock):
    sampler = HostSampler(source, clock.ms)
    for _ in range(10):
        sampler.sample()
        clock.advance(1000)
    assert source.calls["net_if_stats"] == 1 and source.calls["default_route_interface"] == 1
    clock.advance(30_000)
    sampler.sample()
    assert source.calls["net_if_stats"] == 2


def test_it_starts_a_new_interface_with_null_rates(source, clock):
    sampler = HostSampler(source, clock.ms)
    sampler.sample()
    source.net["eth9"] = source.net["eth0"]
    clock.advance(1000)
    eth9 = next(e for e in sampler.sample()["network"] if e["iface"] == "eth9")
    assert eth9["rx_mbps"] is None

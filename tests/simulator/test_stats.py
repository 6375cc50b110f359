"""What the simulator counts and how it sums a run up: histograms, merging, the summary."""

import pytest

from simulator.config import RunConfig
from simulator.stats import FleetStats, LatencyHistogram, summary


def test_it_reads_percentiles_to_within_two_percent():
    histogram = LatencyHistogram()
    for ms in range(1, 1001):
        histogram.add(ms / 1000.0)

    assert histogram.count == 1000
    assert histogram.quantile_ms(0.50) == pytest.approx(500.0, rel=0.02)
    assert histogram.quantile_ms(0.99) == pytest.approx(990.0, rel=0.02)
    assert histogram.quantile_ms(1.0) == pytest.approx(1000.0, rel=0.02)
    assert LatencyHistogram().quantile_ms(0.5) is None


def test_it_keeps_a_bounded_number_of_buckets():
    histogram = LatencyHistogram()
    for i in range(100_000):
        histogram.add(0.001 + (i % 1000) * 0.00001)  # 1 to 11 ms
    assert len(histogram.buckets) < 150


def recorded(*outcomes, request="snapshot", seconds=0.01):
    stats = FleetStats()
    for outcome in outcomes:
        stats.record(request, outcome, seconds)
    return stats


def test_it_counts_failures_by_kind_and_not_acknowledgements_or_notices():
    stats = recorded("ok", "ok", "http_503", "timeout", "connection_error", "unknown_instance")
    stats.record("heartbeat", "capability_resync", 0.01)

    assert stats.sent() == 7
    assert stats.acknowledged() == 2
    assert stats.errors() == {"http_503": 1, "timeout": 1, "connection_error": 1, "unknown_instance": 1}
    assert stats.errors("heartbeat") == {}


def test_processes_add_up_and_the_run_lasts_as_long_as_its_longest_part():
    first, second = recorded("ok", "ok", seconds=0.002), recorded("ok", "http_500", seconds=0.2)
    first.elapsed_s, second.elapsed_s = 9.5, 10.0
    first.note("restarts")
    second.note("restarts", 2)
    first.finished = second.finished = True

    total = FleetStats.merged([FleetStats.from_wire(first.to_wire()), FleetStats.from_wire(second.to_wire())])

    assert total.sent() == 4 and total.acknowledged() == 3
    assert total.errors() == {"http_500": 1}
    assert total.events["restarts"] == 3
    assert total.elapsed_s == 10.0
    assert total.finished is True
    assert total.latency["snapshot"].quantile_ms(0.25) == pytest.approx(2.0, rel=0.02)
    assert total.latency["snapshot"].quantile_ms(1.0) == pytest.approx(200.0, rel=0.02)


def test_a_run_is_not_finished_until_every_process_is():
    done, running = FleetStats(), FleetStats()
    done.finished = True
    assert FleetStats.merged([done, running]).finished is False


def test_its_summary_compares_the_achieved_rate_with_the_target():
    stats = recorded(*["ok"] * 950, "http_502")
    stats.record("register", "ok", 0.005)
    stats.note("report_slots", 951)
    stats.note("shed_slots", 49)
    stats.elapsed_s = 10.0

    result = summary(stats, RunConfig(proxy_url="http://p", instances=100, interval_ms=1000))

    assert result["sent"] == 952 and result["acknowledged"] == 951
    assert result["errors"] == 1 and result["errors_by_kind"] == {"http_502": 1}
    assert result["requests"]["snapshot"] == {"sent": 951, "acknowledged": 950, "errors": 1,
                                              "latency_ms": result["requests"]["snapshot"]["latency_ms"]}
    assert result["rate"] == {"target_per_s": 100.0, "due_per_s": 100.0, "sent_per_s": 95.1,
                              "achieved_per_s": 95.0, "achieved_ratio": 0.95, "acknowledged_of_due": 0.95}
    assert result["latency_ms"]["p50"] == pytest.approx(10.0, rel=0.02)
    assert result["events"] == {"report_slots": 951, "shed_slots": 49}


def test_a_run_that_never_started_has_no_rates():
    result = summary(FleetStats(), RunConfig(proxy_url="http://p", instances=10, interval_ms=1000))
    assert result["rate"]["achieved_per_s"] is None
    assert result["latency_ms"] == {"p50": None, "p90": None, "p99": None, "max": None}

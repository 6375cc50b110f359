"""The admission rule of SPEC 2.2, thresholds as settings."""

import pytest

from agent.capacity import AdmissionThresholds, admission, capacity_hint, memory_free_ratio

DEFAULTS = AdmissionThresholds()


def gpu(index=0, health="ok", used=1000.0, total=80000.0):
    return {"index": index, "health": health, "memory_used_mb": used, "memory_total_mb": total}


def test_it_gives_the_memory_free_ratio_four_decimals_or_null():
    assert memory_free_ratio(1000.0, 3000.0) == 0.3333
    assert memory_free_ratio(None, 8000.0) is None
    assert memory_free_ratio(10.0, 0) is None


def test_it_accepts_on_a_healthy_host():
    assert admission(0.5, 20.0, [gpu()], DEFAULTS) == ("accepting", [])


@pytest.mark.parametrize("ratio, cpu, gpus, state, reasons", [
    (0.049, 10.0, [], "rejecting", ["memory_free_ratio=0.049<0.05"]),
    (0.05, 10.0, [], "accepting", []),
    (0.5, 10.0, [gpu(1, health="error")], "rejecting", ["gpu1:health=error"]),
    (0.5, 95.1, [], "degraded", ["cpu_utilization_pct=95.1>95.0"]),
    (0.5, 95.0, [], "accepting", []),
    (0.5, 10.0, [gpu(used=78000.0)], "degraded", ["gpu0:memory_used_ratio=0.975>0.97"]),
    (0.5, 10.0, [gpu(used=77600.0)], "accepting", []),
    (0.5, 10.0, [gpu(2, health="degraded")], "degraded", ["gpu2:health=degraded"]),
])
def test_it_applies_each_rule(ratio, cpu, gpus, state, reasons):
    assert admission(ratio, cpu, gpus, DEFAULTS) == (state, reasons)


def test_it_lets_rejecting_win_and_lists_every_cause():
    state, reasons = admission(0.01, 99.0, [gpu(0, health="error"), gpu(1, health="degraded")], DEFAULTS)
    assert state == "rejecting"
    assert reasons == ["memory_free_ratio=0.01<0.05", "gpu0:health=error", "cpu_utilization_pct=99.0>95.0",
                       "gpu1:health=degraded"]


def test_it_decides_nothing_on_unknown_values():
    assert admission(None, None, [gpu(used=None), gpu(1, total=None)], DEFAULTS) == ("accepting", [])


def test_it_honours_the_thresholds():
    strict = AdmissionThresholds(min_memory_free_ratio=0.5, max_cpu_pct=50.0, max_gpu_memory_ratio=0.5)
    assert admission(0.4, 10.0, [], strict)[0] == "rejecting"
    assert admission(0.6, 60.0, [], strict)[0] == "degraded"
    assert admission(0.6, 10.0, [gpu(used=50000.0)], strict)[0] == "degraded"


def test_it_builds_the_capacity_hint_object():
    hint = capacity_hint({"free_mb": 400.0, "total_mb": 10000.0}, {"utilization_pct": 10.0}, [], DEFAULTS)
    assert hint == {"memory_free_ratio": 0.04, "admission_state": "rejecting",
                    "admission_reasons": ["memory_free_ratio=0.04<0.05"]}


def engine(status="ok", waiting=0, usage=0.5):
    return {"status": status, "requests_waiting": waiting, "kv_cache_usage_ratio": usage}


@pytest.mark.parametrize("engines, state, reasons", [
    ([engine()], "accepting", []),
    ([engine(usage=0.95)], "degraded", ["engine0:kv_cache_usage_ratio=0.95>=0.95"]),
    ([engine(usage=0.9499)], "accepting", []),
    ([engine(waiting=32)], "degraded", ["engine0:requests_waiting=32>=32"]),
    ([engine(waiting=31)], "accepting", []),
    ([engine(), engine(waiting=40, usage=0.99)], "degraded",
     ["engine1:kv_cache_usage_ratio=0.99>=0.95", "engine1:requests_waiting=40>=32"]),
    ([engine("timeout", None, None)], "rejecting", ["engine_timeout"]),
    ([engine("timeout", None, None), engine("http_error", None, None), engine("timeout", None, None)],
     "rejecting", ["engine_timeout", "engine_http_error"]),
    ([engine("unreachable", None, None), engine()], "accepting", []),  # one engine ok: not rejecting
    ([engine(waiting=None, usage=None)], "accepting", []),  # unknown figures decide nothing
    ([], "accepting", []),
])
def test_it_weighs_the_engines(engines, state, reasons):
    assert admission(0.5, 10.0, [], DEFAULTS, engines) == (state, reasons)


def test_it_lists_engine_causes_after_the_hosts():
    state, reasons = admission(0.01, 10.0, [gpu(0, health="degraded")], DEFAULTS, [engine("bad_format", None, None)])
    assert state == "rejecting"
    assert reasons == ["memory_free_ratio=0.01<0.05", "engine_bad_format", "gpu0:health=degraded"]


def test_it_takes_the_engine_thresholds_from_settings():
    strict = AdmissionThresholds(max_engine_kv_usage_ratio=0.8, max_engine_requests_waiting=5)
    assert admission(0.5, 10.0, [], strict, [engine(waiting=5)])[1] == ["engine0:requests_waiting=5>=5"]
    assert admission(0.5, 10.0, [], strict, [engine(usage=0.8)])[1] == ["engine0:kv_cache_usage_ratio=0.8>=0.8"]

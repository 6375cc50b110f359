"""The /metrics families an operator joins and alerts on: proxy_id everywhere, GPU identity as DCGM
exporter labels it, the GPU and host figures of the snapshot, non-overlapping pool families, bounded labels."""

import pytest

from proxy_app.ops.history import record_pool
from proxy_app.pool.summary import proxy_id
from tests.factories import make_gpu, make_snapshot
from tests.proxy.test_metrics import scrape, value

pytestmark = pytest.mark.django_db
GPU0 = {"instance_id": "gpu-1", "gpu": "0", "UUID": "GPU-0", "modelName": "NVIDIA H100"}


@pytest.fixture
def host(register_instance, report, frozen):
    """gpu-1: two GPUs, the second hot, throttled, with an XID and an ECC error; reported 3 s ago."""
    register_instance("gpu-1")
    gpus = [make_gpu(0, power_limit_w=700.0, sm_clock_mhz=1980, mem_clock_mhz=2619, ecc_uncorrected_volatile=0,
                     xid_count=0, xid_last=None, throttle_reasons=[]),
            make_gpu(1, health="error", ecc_uncorrected_volatile=2, xid_count=3, xid_last=79,
                     throttle_reasons=["hw_slowdown", "sw_power_cap", "made_up_reason"])]
    report("gpu-1", make_snapshot(gpus=gpus, admission="degraded"))
    frozen.shift(3)


def test_every_proxy_family_carries_the_proxy_id(api, host):
    record_pool()
    samples = scrape(api)
    ours = [(name, dict(labels)) for name, labels in samples if name.startswith("fleetwatch_")
            and not name.startswith(("fleetwatch_http", "fleetwatch_build_info"))]
    assert ours
    assert {name: labels.get("proxy_id") for name, labels in ours if labels.get("proxy_id") != proxy_id()} == {}


def test_gpu_series_carry_dcgm_exporters_identity_labels_and_every_figure(api, host):
    samples = scrape(api)
    assert value(samples, "fleetwatch_gpu_power_watts", **GPU0) == 100.0
    assert value(samples, "fleetwatch_gpu_power_limit_watts", **GPU0) == 700.0
    assert value(samples, "fleetwatch_gpu_sm_clock_hertz", **GPU0) == 1980e6
    assert value(samples, "fleetwatch_gpu_memory_clock_hertz", **GPU0) == 2619e6
    assert value(samples, "fleetwatch_gpu_memory_total_bytes", **GPU0) == 80000 * 2**20
    assert value(samples, "fleetwatch_gpu_ecc_uncorrected_volatile_errors", **GPU0) == 0
    assert value(samples, "fleetwatch_gpu_xid_errors", **GPU0) == 0
    assert value(samples, "fleetwatch_gpu_last_xid", **GPU0) is None  # none yet: no sample, not 0
    gpu1 = {**GPU0, "gpu": "1", "UUID": "GPU-1"}
    assert value(samples, "fleetwatch_gpu_ecc_uncorrected_volatile_errors", **gpu1) == 2
    assert value(samples, "fleetwatch_gpu_xid_errors", **gpu1) == 3
    assert value(samples, "fleetwatch_gpu_last_xid", **gpu1) == 79


def test_health_is_one_gauge_per_verdict_and_throttle_reasons_are_bounded(api, host):
    samples = scrape(api)
    gpu1 = {**GPU0, "gpu": "1", "UUID": "GPU-1"}
    assert [value(samples, "fleetwatch_gpu_health", **gpu1, health=h) for h in ("ok", "degraded", "error")] == [0, 0, 1]
    assert value(samples, "fleetwatch_gpu_health", **GPU0, health="ok") == 1
    reasons = {dict(labels)["reason"] for name, labels in samples if name == "fleetwatch_gpu_throttle_reason"}
    assert reasons == {"hw_slowdown", "sw_power_cap", "other"}


def test_host_network_admission_and_report_age(api, host):
    samples = scrape(api)
    assert value(samples, "fleetwatch_instance_network_receive_bits_per_second", instance_id="gpu-1") == 1e6
    assert value(samples, "fleetwatch_instance_network_transmit_bits_per_second", instance_id="gpu-1") == 2e6
    states = [value(samples, "fleetwatch_instance_admission_state", instance_id="gpu-1", state=s)
              for s in ("accepting", "degraded", "rejecting")]
    assert states == [0, 1, 0]
    assert value(samples, "fleetwatch_instance_resource_report_age_seconds", instance_id="gpu-1") == 3.0


def test_up_counts_the_ttl_and_alive_only_the_alive_window(api, host, frozen):
    frozen.shift(20)  # 23 s after the report: past 1.5 heartbeat intervals (15 s), within the 30 s TTL: suspect
    samples = scrape(api)
    assert value(samples, "fleetwatch_instance_up", instance_id="gpu-1") == 1
    assert value(samples, "fleetwatch_instance_alive", instance_id="gpu-1") == 0
    assert value(samples, "fleetwatch_instances", state="suspect") == 1


def test_fenced_is_one_for_a_fenced_instance_only(api, host, register_instance, report):
    register_instance("cpu-1")
    report("cpu-1", make_snapshot())
    samples = scrape(api)
    assert value(samples, "fleetwatch_instance_fenced", instance_id="gpu-1") == 1  # its GPU 1 is in error
    assert value(samples, "fleetwatch_instance_fenced", instance_id="cpu-1") == 0


def test_the_pool_families_do_not_overlap(api, host, register_instance, report):
    register_instance("cpu-1")
    register_instance("new-1")  # alive, no resource yet
    report("cpu-1", make_snapshot(gpus=()))
    record_pool()
    samples = scrape(api)
    reporting = {s: value(samples, "fleetwatch_pool_instances_reporting", admission_state=s)
                 for s in ("accepting", "degraded", "rejecting")}
    assert reporting == {"accepting": 1, "degraded": 1, "rejecting": 0}
    assert value(samples, "fleetwatch_pool_instances_missing_resource") == 1
    assert sum(reporting.values()) + 1 == value(samples, "fleetwatch_pool_instances_alive") == 3
    assert [value(samples, "fleetwatch_pool_admission_state", state=s) for s in ("accepting", "degraded",
                                                                                 "rejecting")] == [0, 1, 0]
    assert value(samples, "fleetwatch_pool_instances", state="alive") == 3  # the compat family stays


def test_methods_are_bounded_and_latency_has_a_route(api, frozen):
    api.client.generic("BREW", "/debug/status")
    api.get("/debug/status")
    samples = scrape(api)
    methods = {dict(labels)["method"] for name, labels in samples if name == "fleetwatch_http_requests_total"}
    assert "BREW" not in methods and "other" in methods
    assert value(samples, "fleetwatch_http_request_duration_seconds_count", route="proxy-debug-status") >= 2


def test_build_info_names_the_versions(api, frozen, settings):
    samples = scrape(api)
    (labels,) = [dict(labels) for name, labels in samples if name == "fleetwatch_build_info"]
    assert labels["roles"] == ",".join(settings.FLEETWATCH_ROLES)
    assert labels["django"].startswith("5.2") and labels["python"].startswith("3.")
    assert labels["version"]


def test_the_recorder_and_the_link_show_how_long_ago_they_worked(api, frozen):
    from proxy_app.models import SchedulerLinkState
    from tests.factories import T0

    record_pool()
    SchedulerLinkState.objects.create(proxy_id=proxy_id(), scheduler_url="http://127.0.0.1:8000",
                                      last_attempt_at=T0, last_ok_at=T0 - 30, consecutive_failures=6)
    frozen.shift(4)
    samples = scrape(api)
    assert value(samples, "fleetwatch_recorder_last_record_age_seconds") == 4.0
    assert value(samples, "fleetwatch_link_last_attempt_age_seconds") == 4.0
    assert value(samples, "fleetwatch_link_last_success_age_seconds") == 34.0
    assert value(samples, "fleetwatch_link_consecutive_failures") == 6


def test_the_prefix_index_shows_each_instance_s_keys_and_counts_updates_and_resyncs(api, register_instance, frozen):
    register_instance("i-1")
    body = {"instance_id": "i-1", "engine": "e0", "epoch": 1, "seq": 0, "block_tokens": 16}
    before = scrape(api)
    updates = value(before, "fleetwatch_prefix_updates_total", proxy_id=proxy_id()) or 0
    resyncs = value(before, "fleetwatch_prefix_resyncs_total", proxy_id=proxy_id()) or 0
    api.post("/v1/instance/prefix_blocks", {**body, "reset": True, "added": [1, 2, 3]})
    api.post("/v1/instance/prefix_blocks", {**body, "engine": "e1", "reset": True, "added": [1]})
    api.post("/v1/instance/prefix_blocks", {**body, "seq": 5, "added": [4]})
    samples = scrape(api)
    assert value(samples, "fleetwatch_prefix_blocks", instance_id="i-1", proxy_id=proxy_id()) == 4
    assert value(samples, "fleetwatch_prefix_updates_total", proxy_id=proxy_id()) == updates + 2
    assert value(samples, "fleetwatch_prefix_resyncs_total", proxy_id=proxy_id()) == resyncs + 1

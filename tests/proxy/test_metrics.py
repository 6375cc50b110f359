"""GET /metrics (SPEC 11): Prometheus text, the pool read at scrape time, unknown values absent."""

import pytest
from prometheus_client.parser import text_string_to_metric_families

from proxy_app.ops.history import record_pool
from tests.factories import make_engine, make_failed_engine, make_gpu, make_snapshot

pytestmark = [pytest.mark.django_db, pytest.mark.both_entry_points]


def scrape(api, **extra):
    response = api.get("/metrics", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name, **labels):
    """The value of the one sample of ``name`` whose labels include ``labels``; None when there is none."""
    found = [v for (sample, labelled), v in samples.items() if sample == name and labels.items() <= dict(labelled).items()]
    assert len(found) <= 1, f"{len(found)} samples of {name} match {labels}"
    return found[0] if found else None


@pytest.fixture
def pool(register_instance, report, frozen, settings):
    """gpu-1 with two GPUs (one without a temperature), cpu-1 without GPUs or a CPU rate, old-1 stale."""
    register_instance("old-1")
    frozen.shift(100)
    register_instance("gpu-1")
    gpus = [make_gpu(0, avg=50.0, used=1024.0, total=81920.0), make_gpu(1, avg=80.0, temperature_c=None)]
    report("gpu-1", make_snapshot(cpu=25.0, used_mb=2048.0, total_mb=8192.0, gpus=gpus))
    register_instance("cpu-1")
    report("cpu-1", make_snapshot(cpu=None, gpus=()))


def test_it_counts_instances_by_state_and_says_which_are_up(api, pool):
    samples = scrape(api)
    assert value(samples, "fleetwatch_instances", state="alive") == 2
    assert value(samples, "fleetwatch_instances", state="stale") == 1
    assert value(samples, "fleetwatch_instances", state="suspect") == 0
    assert value(samples, "fleetwatch_instance_up", instance_id="gpu-1") == 1
    assert value(samples, "fleetwatch_instance_up", instance_id="old-1") == 0


def test_it_gives_host_and_gpu_figures_in_base_units(api, pool):
    samples = scrape(api)
    assert value(samples, "fleetwatch_instance_cpu_utilization_ratio", instance_id="gpu-1") == 0.25
    assert value(samples, "fleetwatch_instance_memory_used_bytes", instance_id="gpu-1") == 2048 * 2**20
    assert value(samples, "fleetwatch_instance_memory_total_bytes", instance_id="gpu-1") == 8192 * 2**20
    assert value(samples, "fleetwatch_gpu_utilization_ratio", instance_id="gpu-1", gpu="0") == 0.5
    assert value(samples, "fleetwatch_gpu_utilization_ratio", instance_id="gpu-1", gpu="1") == 0.8
    assert value(samples, "fleetwatch_gpu_memory_used_bytes", instance_id="gpu-1", gpu="0") == 1024 * 2**20
    assert value(samples, "fleetwatch_gpu_temperature_celsius", instance_id="gpu-1", gpu="0") == 40


def test_it_leaves_an_unknown_value_out_instead_of_writing_0(api, pool):
    samples = scrape(api)
    assert value(samples, "fleetwatch_instance_cpu_utilization_ratio", instance_id="cpu-1") is None
    assert value(samples, "fleetwatch_gpu_temperature_celsius", instance_id="gpu-1", gpu="1") is None
    assert not [key for key in samples if key[0].startswith("fleetwatch_gpu") and ("instance_id", "cpu-1") in key[1]]


def test_it_labels_only_live_instances(api, pool, report):
    report("old-1", make_snapshot(cpu=99.0))  # revives it
    samples = scrape(api)
    assert value(samples, "fleetwatch_instance_cpu_utilization_ratio", instance_id="old-1") == 0.99


def test_it_drops_the_labels_of_an_instance_gone_stale(api, pool, frozen):
    frozen.shift(31)
    samples = scrape(api)
    assert not [key for key in samples if key[0].startswith("fleetwatch_instance_cpu")]
    assert value(samples, "fleetwatch_instance_up", instance_id="gpu-1") == 0


def test_it_gives_the_pool_summary(api, pool):
    record_pool()
    samples = scrape(api)
    assert value(samples, "fleetwatch_pool_instances", state="alive") == 2
    assert value(samples, "fleetwatch_pool_instances", state="with_resource") == 2
    assert value(samples, "fleetwatch_pool_instances", state="accepting") == 2
    assert value(samples, "fleetwatch_pool_instances", state="rejecting") == 0


def test_it_counts_requests_by_view_method_and_status(api, frozen):
    api.get("/debug/status")
    api.get("/debug/status")
    api.post("/v1/instance/heartbeat", {"instance_id": "nobody"})
    samples = scrape(api)
    assert value(samples, "fleetwatch_http_requests_total", view="proxy-debug-status", method="GET", status="200") >= 2
    assert value(samples, "fleetwatch_http_requests_total", view="instance-heartbeat", method="POST",
                 status="200") >= 1
    assert value(samples, "fleetwatch_http_request_duration_seconds_count", route="proxy-debug-status") >= 2
    assert value(samples, "fleetwatch_http_request_duration_seconds_count", route="instance-heartbeat") >= 1


def test_it_counts_static_files_under_their_own_view(api, client, frozen):
    assert client.get("/static/fleetwatch/app.css").status_code == 200  # WhiteNoise, before any URL
    assert client.get("/static/fleetwatch/no-such-file.css").status_code == 404
    assert client.get("/no/such/page").status_code == 404
    samples = scrape(api)
    assert value(samples, "fleetwatch_http_requests_total", view="static", method="GET", status="200") >= 1
    assert value(samples, "fleetwatch_http_requests_total", view="static", method="GET", status="404") >= 1
    assert value(samples, "fleetwatch_http_requests_total", view="unmatched", method="GET", status="404") >= 1


def test_it_needs_a_token_or_a_staff_session(api, admin_client, frozen):
    assert api.as_anonymous().get("/metrics").status_code == 401
    assert admin_client.get("/metrics").status_code == 200
    for scope in ("read", "instance", "proxy"):
        assert api.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {api.token(scope)}").status_code == 200


def test_it_answers_another_method_with_405_whoever_asks(api, frozen):
    for extra in ({}, {"HTTP_AUTHORIZATION": f"Bearer {api.token('read')}"}):
        response = api.client.post("/metrics", data="{}", content_type="application/json", **extra)
        assert response.status_code == 405
        assert response.json()["error"] == "method_not_allowed"


def test_it_exports_each_ok_engine_per_instance_and_model_and_the_pool_saturation(
        api, register_instance, report, frozen, settings):
    settings.FLEETWATCH_SATURATION_WAITING = 5
    register_instance("e-1")
    engines = [make_engine(engine_index="0", requests_waiting=3, requests_running=4, kv_cache_usage_ratio=0.5),
               make_engine(engine_index="1", requests_waiting=2, requests_running=1, kv_cache_usage_ratio=0.7,
                           ttft_p95_s=1.5),
               make_engine(model="big", requests_waiting=0, requests_running=2, kv_cache_usage_ratio=0.1),
               make_failed_engine("timeout", model="down")]
    report("e-1", make_snapshot(engines=engines))
    samples = scrape(api)
    assert value(samples, "fleetwatch_engine_requests_waiting", instance_id="e-1", model="tiny") == 5
    assert value(samples, "fleetwatch_engine_requests_running", instance_id="e-1", model="tiny") == 5
    assert value(samples, "fleetwatch_engine_kv_cache_usage_ratio", instance_id="e-1", model="tiny") == 0.7
    assert value(samples, "fleetwatch_engine_ttft_p95_seconds", instance_id="e-1", model="tiny") == 1.5
    assert value(samples, "fleetwatch_engine_requests_waiting", instance_id="e-1", model="big") == 0
    # A failed engine has no figures: no sample, never a 0.
    assert value(samples, "fleetwatch_engine_requests_waiting", instance_id="e-1", model="down") is None
    assert value(samples, "fleetwatch_pool_engine_requests_waiting") == 5
    assert value(samples, "fleetwatch_pool_engine_saturation") == 1.0  # 5 waiting ÷ 5

"""/pool/instances/<id>/ (SPEC 8): one instance down to each GPU, its history, status changes and raw JSON."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from proxy_app.ops.history import record_instances
from tests.factories import T0, make_capabilities, make_gpu, make_snapshot
from tests.pages.conftest import by_testid, one, text_of

pytestmark = pytest.mark.django_db


def eight_gpus():
    """An 8-GPU host: GPU 3 runs hot and throttled (degraded), GPU 5 has uncorrected ECC errors (error)."""
    gpus = [make_gpu(i, avg=70.0 + i, used=60000.0, total=80000.0, power_w=500.0, power_limit_w=700.0,
                     sm_clock_mhz=1980, mem_clock_mhz=2619, ecc_uncorrected_volatile=0, throttle_reasons=[],
                     health_reasons=[], name="NVIDIA H100 80GB HBM3") for i in range(8)]
    gpus[3].update(health="degraded", temperature_c=88, throttle_reasons=["sw_thermal_slowdown"],
                   health_reasons=["temperature_c=88>=85", "throttle:sw_thermal_slowdown"])
    gpus[5].update(health="error", ecc_uncorrected_volatile=2, health_reasons=["ecc_uncorrected_volatile=2"])
    return gpus


def gpu_cards(html):
    return re.findall(r'<article class="card gpu-card([^"]*)" data-gpu-index="(\d+)"', html)


def test_it_shows_a_card_per_gpu_and_flags_the_unhealthy_ones(page, frozen, gpu_host):
    gpu_host("big", gpus=eight_gpus(), admission="rejecting")
    html = page("/pool/instances/big/")
    cards = gpu_cards(html)
    assert [index for _, index in cards] == [str(i) for i in range(8)]
    assert {index: classes.strip() for classes, index in cards if classes.strip()} == {
        "3": "gpu-card--warn", "5": "gpu-card--crit"}
    assert by_testid(html, "gpu-health") == ["ok", "ok", "ok", "degraded", "ok", "error", "ok", "ok"]
    cards_text = by_testid(html, "gpu-card")
    assert "ecc_uncorrected_volatile=2" in cards_text[5] and "ECC uncorrected 2" in cards_text[5]
    assert "temperature_c=88>=85" in cards_text[3] and "88 °C" in cards_text[3] and "sw_thermal_slowdown" in cards_text[3]
    card = cards_text[0]
    for shown in ("GPU 0", "NVIDIA H100 80GB HBM3", "GPU-0", "70.0 %", "75.0 %", "58.6 GiB of 78.1 GiB",
                  "500 W", "limit 700 W", "1980 MHz / 2619 MHz", "throttle none", "5 samples in 5.0 s"):
        assert shown in card, shown
    assert "2 unhealthy" in text_of(html)


def test_it_shows_cpu_cores_memory_swap_network_and_disks(page, frozen, register_instance, report):
    snapshot = make_snapshot(cpu=37.5, network=[
        {"iface": "eth0", "rx_mbps": 1.0, "tx_mbps": 2.0, "speed_mbps": 10000},
        {"iface": "ib0", "rx_mbps": 12400.0, "tx_mbps": None, "speed_mbps": None,
         "rx_bytes_total": 1024 ** 3, "tx_bytes_total": 0},
    ])
    snapshot["devices"]["cpu"].update(per_core_pct=[10.0, 80.0, 95.0, None], count_logical=4, count_physical=2)
    snapshot["devices"]["memory"].update(swap_used_mb=1024.0, swap_total_mb=4096.0)
    snapshot["devices"]["disk"] = [{"mount": "/models", "used_gb": 900.0, "total_gb": 1000.0}]
    register_instance("host")
    report("host", snapshot)
    html = page("/pool/instances/host/")
    assert one(html, "cpu-util") == "37.5 %"
    cores = re.findall(r'<span class="core core--(\w+)" title="core (\d): ([^"]+)"', html)
    assert cores == [("ok", "0", "10.0 %"), ("warn", "1", "80.0 %"), ("crit", "2", "95.0 %"), ("none", "3", "–")]
    text = text_of(html)
    assert "4 logical / 2 physical cores" in text
    assert "1.0 GiB used of 4.0 GiB" in text  # swap
    assert "ib0 12.4 Gbit/s – – 1.0 GiB 0 B" in text
    assert "/models 90.0 % 900.0 GiB of 1000.0 GiB" in text


def test_it_says_plainly_when_a_host_has_no_gpu(page, frozen, cpu_host):
    cpu_host("cpu-only", gpu_status="nvml_unavailable: NVML Shared Library Not Found")
    html = page("/pool/instances/cpu-only/")
    assert one(html, "no-gpu") == "No GPUs on this host (nvml_unavailable: NVML Shared Library Not Found)."
    assert gpu_cards(html) == []


def test_it_marks_a_stale_instance(page, frozen, cpu_host):
    cpu_host("gone")
    frozen.shift(45)
    html = page("/pool/instances/gone/")
    assert one(html, "instance-status") == "stale"
    assert "Stale: last seen 45 s ago (TTL 30 s)" in text_of(html)
    assert 'class="grid-2 is-stale-data"' in html


def test_it_marks_figures_from_an_old_snapshot_of_a_live_instance(page, frozen, cpu_host, instance_heartbeat):
    cpu_host("quiet")
    for _ in range(4):
        frozen.shift(5)
        instance_heartbeat("quiet")
    html = page("/pool/instances/quiet/")
    assert one(html, "instance-status") == "alive"
    assert "No fresh snapshot: the last one arrived 20 s ago" in text_of(html)


def test_it_shows_a_dash_for_every_value_not_measured(page, frozen, gpu_host):
    gpu_host("blank", cpu=None, used_mb=None, total_mb=None, free_mb=None, admission=None,
             gpus=[make_gpu(0, avg=None, used=None, total=None, temperature_c=None, power_w=None, ok=False,
                            utilization_sample_quality="error")])
    html = page("/pool/instances/blank/")
    assert one(html, "cpu-util") == "–"
    card = one(html, "gpu-card")
    assert "utilisation –" in card and "– of –" in card and "temperature –" in card and "throttle –" in card


def test_it_waits_for_the_first_snapshot(page, frozen, register_instance):
    register_instance("new")
    html = page("/pool/instances/new/")
    assert "No resource snapshot yet" in text_of(html) and gpu_cards(html) == []


def test_it_shows_capabilities_registration_and_raw_json(page, frozen, register_instance, report):
    register_instance("cap", capabilities=make_capabilities(), tags=["a100-pool"], meta={"zone": "eu-1"})
    report("cap")
    html = page("/pool/instances/cap/")
    text = text_of(html)
    assert "model meta-llama/Llama-3.1-8B-Instruct @ main" in text
    assert "parallelism TP 2 · PP 1 · DP –" in text and "sql-lora @ v2" in text
    assert "a100-pool" in text and "zone eu-1" in text
    assert 'data-copy="#raw-snapshot"' in html and 'data-copy="#raw-row"' in html
    raw = re.search(r'<pre class="json__text" id="raw-snapshot">(.*?)</pre>', html, re.S).group(1)
    assert "&quot;schema_version&quot;: &quot;resource_snapshot_v1&quot;" in raw


def test_it_lists_status_changes_newest_first(page, frozen, cpu_host, report):
    cpu_host("flappy")
    frozen.shift(45)
    report("flappy")
    text = text_of(page("/pool/instances/flappy/").split('aria-label="Status changes"')[1])
    assert text.index("stale → alive snapshot") < text.index("suspect → stale missed heartbeats") < text.index(
        "alive → suspect missed heartbeats") < text.index("– → alive registered")
    assert "2026-01-01 00:00:30 UTC (15 s ago)" in text  # stale when the TTL ran out, not when noticed


def test_it_answers_an_unknown_instance_with_an_html_404(page, frozen):
    for path in ("/pool/instances/nope/", "/pool/instances/nope/live"):
        html = page(path, status=404)
        assert "No instance" in one(html, "not-found") and "nope" in one(html, "not-found")


def test_it_takes_ids_with_slashes_and_colons(page, frozen, cpu_host):
    cpu_host("hp_10.0.0.1:8000/a")
    assert "hp_10.0.0.1:8000/a" in text_of(page("/pool/instances/hp_10.0.0.1:8000/a/"))
    assert 'hx-get="/pool/instances/hp_10.0.0.1:8000/a/live"' in page("/pool/instances/hp_10.0.0.1:8000/a/live")


def test_it_refreshes_the_live_part_alone(page, frozen, gpu_host, report):
    gpu_host("big", gpus=eight_gpus())
    report("big", make_snapshot(cpu=73.3, gpus=eight_gpus()))
    html = page("/pool/instances/big/live")
    assert html.lstrip().startswith('<div id="instance-live"') and "<html" not in html
    assert one(html, "cpu-util") == "73.3 %" and len(gpu_cards(html)) == 8


def test_it_answers_the_series_as_chart_columns(staff, frozen, cpu_host, report):
    cpu_host("i-1", cpu=10.0)
    record_instances()
    frozen.shift(1)
    report("i-1", make_snapshot(cpu=20.0), seq=2)
    record_instances()
    body = staff.get("/pool/instances/i-1/series?range=15m").json()
    assert body["t"] == [T0, T0 + 1] and body["cpu_util"] == [10.0, 20.0]
    assert body["memory_used_ratio"] == [25.0, 25.0] and body["gpu_util_avg"] == [None, None]
    assert body["network_rx_mbps"] == [1.0, 1.0]
    missing = staff.get("/pool/instances/nope/series?range=15m")
    assert missing.status_code == 404 and missing.json() == {"ok": False, "error": "not_found"}


@pytest.mark.parametrize("path", ["/pool/instances/big/", "/pool/instances/big/live"])
def test_it_reads_the_same_number_of_queries_for_one_gpu_or_eight(staff, frozen, gpu_host, report, path):
    def queries():
        with CaptureQueriesContext(connection) as captured:
            assert staff.get(path).status_code == 200
        return len(captured)

    gpu_host("big", gpus=[make_gpu(0)])
    one_gpu = queries()
    for seq in range(2, 12):  # more GPUs and more status changes
        frozen.shift(45)
        report("big", make_snapshot(gpus=eight_gpus()), seq=seq)
    assert queries() == one_gpu <= 5


def test_a_stale_instance_shows_its_last_admission_state_as_not_current(page, frozen, cpu_host):
    cpu_host("old", admission="accepting")
    assert one(page("/pool/instances/old/"), "instance-admission") == "accepting"
    frozen.shift(45)
    html = page("/pool/instances/old/")
    assert one(html, "instance-admission") == "last: accepting"
    assert "badge--past" in html.split('data-testid="instance-admission"')[1].split("</p>")[0]

"""/fleet/proxies/<id>/ (SPEC 8): one proxy's pool summary in full, trend charts, status changes, raw JSON."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from controlplane import clock
from scheduler_app.models import Proxy
from tests.factories import T0, make_pool_resource
from tests.pages.conftest import one, text_of

pytestmark = pytest.mark.django_db


def full_pool():
    return make_pool_resource(
        instances={"total": 5, "alive": 4, "stale": 1, "with_resource": 3, "missing_resource": 1,
                   "accepting": 2, "degraded": 1, "rejecting": 0},
        load={"inflight_total": 12, "qps_1m_total": 3.25, "capacity": 8, "load_ratio": 1.5},
        utilization={"cpu_avg": 41.0, "cpu_max": 88.0, "memory_used_mb": 300000.0, "memory_total_mb": 1000000.0,
                     "memory_used_ratio": 0.3, "memory_free_ratio_min": 0.2, "gpu_util_avg": 66.0,
                     "gpu_util_max": 99.0, "gpu_mem_used_mb": 400000.0, "gpu_mem_total_mb": 640000.0,
                     "gpu_mem_used_ratio": 0.625, "network_rx_mbps_total": 1500.0, "network_tx_mbps_total": 12.5,
                     "gpu_count_total": 8},
        resource_freshness_s={"min": 0.2, "avg": 0.6, "max": 1.4},
        admission="degraded", pool_admission_reason="2 accepting, 1 degraded, 0 rejecting, 4 alive",
        metric_source={"instances": "proxy_instance_pool_ttl", "queue_pressure": "unavailable"},
        metric_quality={"resource": "partial", "load": "complete", "queue": "missing"},
    )


def test_it_shows_the_pool_summary_in_full(page, frozen, register_proxy):
    register_proxy("pxy-a", pool_resource=full_pool(), meta={"proxy_url": "http://10.0.0.1:8002"})
    html = page("/fleet/proxies/pxy-a/")
    text = text_of(html)
    assert one(html, "proxy-status") == "alive" and one(html, "proxy-alive") == "4"
    for shown in ("2 accepting, 1 degraded, 0 rejecting, 4 alive", "3 reporting · 1 without resources",
                  "12 in flight", "3.25 qps · capacity 8 · load 150.0 %", "busiest 88.0 %",
                  "292.969 GiB", "↓ 1.5 Gbit/s · ↑ 12.5 Mbit/s", "min 200 ms · max 1.4 s", "8 GPUs",
                  "resource partial load complete", "queue_pressure unavailable"):
        assert shown.replace("292.969 GiB", "293.0 GiB") in text, shown
    assert 'href="http://10.0.0.1:8002/pool/"' in html
    assert 'data-copy="#raw-pool-resource"' in html


def test_it_marks_a_stale_proxy(page, frozen, register_proxy):
    register_proxy("pxy-a", pool_resource=full_pool())
    frozen.shift(60)
    html = page("/fleet/proxies/pxy-a/")
    assert one(html, "proxy-status") == "stale" and "Stale: last seen 60 s ago" in text_of(html)
    assert 'class="panel is-stale-data"' in html


def test_it_shows_a_proxy_without_a_summary(page, frozen, register_proxy):
    register_proxy("pxy-bare")
    html = page("/fleet/proxies/pxy-bare/")
    assert "has not sent a pool summary yet" in text_of(html) and one(html, "proxy-alive") == "–"


def test_it_lists_status_changes(page, frozen, register_proxy):
    register_proxy("pxy-a")
    frozen.shift(45)
    Proxy.objects.sweep(T0 + 45)
    register_proxy("pxy-a")
    text = text_of(page("/fleet/proxies/pxy-a/").split('aria-label="Status changes"')[1])
    assert "stale → alive re-registered" in text and "– → alive registered" in text


def test_it_answers_an_unknown_proxy_with_an_html_404(page, frozen):
    for path in ("/fleet/proxies/nope/", "/fleet/proxies/nope/live"):
        assert "No proxy" in one(page(path, status=404), "not-found")


def test_it_refreshes_the_live_part_alone(page, frozen, register_proxy):
    register_proxy("pxy-a", pool_resource=full_pool())
    html = page("/fleet/proxies/pxy-a/live")
    assert html.lstrip().startswith('<div id="proxy-live"') and "<html" not in html


def test_it_answers_the_series_as_chart_columns(staff, frozen, register_proxy, proxy_heartbeat):
    register_proxy("pxy-a", pool_resource=full_pool())
    frozen.shift(5)
    proxy_heartbeat("pxy-a", pool_resource=make_pool_resource(alive=1, total=3, cpu=10.0, memory_used_ratio=0.5))
    body = staff.get("/fleet/proxies/pxy-a/series?range=15m").json()
    assert body["t"] == [T0, T0 + 5] and body["cpu_avg"] == [41.0, 10.0]
    assert body["memory_used_ratio"] == [30.0, 50.0] and body["stale"] == [1, 2]
    assert body["network_rx_mbps_total"] == [1500.0, None]  # the second summary carries no network rate
    assert staff.get("/fleet/proxies/nope/series?range=1h").status_code == 404


@pytest.mark.parametrize("path", ["/fleet/proxies/pxy-a/", "/fleet/proxies/pxy-a/live"])
def test_it_reads_the_same_number_of_queries_whatever_the_history(staff, frozen, register_proxy, path):
    def queries():
        with CaptureQueriesContext(connection) as captured:
            assert staff.get(path).status_code == 200
        return len(captured)

    register_proxy("pxy-a", pool_resource=full_pool())
    few = queries()
    for _ in range(10):
        frozen.shift(45)
        Proxy.objects.sweep(clock.now())
        register_proxy("pxy-a", pool_resource=full_pool())
    assert queries() == few <= 5
    assert re.search(r"re-registered", staff.get(path).content.decode())


def test_a_load_against_a_capacity_nobody_configured_says_so(page, frozen, register_proxy):
    # What our link sends with FLEETWATCH_PROXY_CAPACITY unset: the default 8, said to be the default.
    register_proxy("pxy-a", pool_resource=full_pool(), max_capacity=8, instance_count=1,
                   meta={"capacity": 8, "capacity_configured": False})
    html = page("/fleet/proxies/pxy-a/")
    assert one(html, "pool-load-note") == "3.25 qps · capacity not configured"
    assert one(html, "declared-max-capacity") == "not configured (its default, 8)"
    assert one(html, "declared-instance-count") == "1 when it registered · 4 alive now"
    assert one(html, "declared-kv-mem") == "not declared"
    assert "150.0 %" not in text_of(html)


def test_a_proxy_that_declares_its_capacity_shows_it(page, frozen, register_proxy):
    register_proxy("pxy-a", pool_resource=full_pool(), max_capacity=8, instance_count=3,
                   kv_mem_per_instance_gb=1.5, meta={"capacity_configured": True})
    html = page("/fleet/proxies/pxy-a/")
    assert one(html, "pool-load-note") == "3.25 qps · capacity 8 · load 150.0 %"
    assert one(html, "declared-max-capacity") == "8"
    assert one(html, "declared-kv-mem") == "1.5 GB"
    assert "KV cache pool 4.5 GB" in text_of(html)


def test_a_proxy_that_declared_nothing_says_so(page, frozen, register_proxy):
    register_proxy("pxy-a")  # an old client: no capacity, no meta
    html = page("/fleet/proxies/pxy-a/")
    assert one(html, "declared-max-capacity") == "not declared"
    assert one(html, "declared-instance-count") == "not declared"
    assert "KV cache pool not declared" in text_of(html)

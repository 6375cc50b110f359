"""/pool/ and its fragments (SPEC 8): every instance with status, age, admission and bars; filters, search, sort, paging."""

import re
from functools import partial

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from proxy_app.ops.history import record_pool
from tests.factories import T0, make_gpu, make_snapshot
from tests.pages import conftest as pages
from tests.pages.conftest import one, text_of

pytestmark = pytest.mark.django_db


row_ids = partial(pages.row_ids, attribute="data-instance-id")
row_of = partial(pages.row_of, attribute="data-instance-id")


def test_it_shows_an_empty_pool_as_a_page_that_says_so(page, frozen):
    html = page("/pool/")
    assert "No instances yet" in one(html, "pool-empty")
    assert one(html, "pool-alive") == "0"
    assert one(html, "pool-admission-state") == "rejecting"  # no instance alive (SPEC 5)


def test_it_lists_each_instance_with_status_age_admission_and_bars(page, frozen, gpu_host, cpu_host):
    gpu_host("gpu-1", gpus=[make_gpu(0, avg=60.0, used=40000.0, total=80000.0)], cpu=42.0)
    cpu_host("cpu-1", cpu=7.5, used_mb=6000.0, total_mb=8000.0, free_mb=2000.0, admission="degraded")
    frozen.shift(12)
    html = page("/pool/")
    assert row_ids(html) == ["cpu-1", "gpu-1"]
    gpu_row = row_of(html, "gpu-1").text
    assert gpu_row.startswith("alive gpu-1 10.0.0.1:8000 12 s ago accepting 42.0 % 25.0 % 60.0 % 50.0 %")
    assert "↓ 1.0 Mbit/s ↑ 2.0 Mbit/s" in gpu_row
    cpu_row = row_of(html, "cpu-1").text
    assert "degraded 7.5 % 75.0 % no GPU –" in cpu_row
    assert one(html, "pool-alive") == "2"


def test_it_marks_a_stale_instance_and_its_old_figures(page, frozen, cpu_host):
    cpu_host("old")
    frozen.shift(45)
    cpu_host("new")
    html = page("/pool/")
    classes, text, _ = row_of(html, "old")
    assert "is-stale" in classes and text.startswith("stale old")
    assert "45 s ago" in text
    assert 'class="col-bar is-stale-data"' in html.split('data-instance-id="old"')[1].split("</tr>")[0]
    assert row_of(html, "new").classes == ""
    assert "1 stale" in html


def test_it_shows_a_dash_for_what_an_instance_has_not_reported(page, frozen, register_instance, report):
    register_instance("silent")
    register_instance("partial")
    report("partial", make_snapshot(cpu=None, network=[{"iface": "eth0", "rx_mbps": None, "tx_mbps": None}]))
    html = page("/pool/")
    assert "no resource report yet" in row_of(html, "silent").text
    half_reported = row_of(html, "partial").text
    assert "– 25.0 %" in half_reported and "↓ – ↑ –" in half_reported


def test_it_never_prints_an_epoch_number_outside_the_raw_json(page, frozen, gpu_host):
    gpu_host("gpu-1")
    html = page("/pool/")
    visible = text_of(re.sub(r'<pre class="json__text".*?</pre>', "", html.split("<main", 1)[1], flags=re.S))
    assert "2026-01-01 00:00:00 UTC" in visible
    assert not re.search(r"1767\d{6}", visible)


@pytest.fixture
def mixed_pool(frozen, cpu_host, register_instance, report):
    """old: stale, 5 % CPU; busy: 90 %, degraded; calm: 30 % on host 10.0.0.9; silent: never reported."""
    cpu_host("old", cpu=5.0)
    frozen.shift(45)
    cpu_host("busy", cpu=90.0, admission="degraded")
    register_instance("calm", host="10.0.0.9")
    report("calm", make_snapshot(cpu=30.0))
    register_instance("silent")


@pytest.mark.parametrize("query, expected", [
    ("", ["busy", "calm", "silent", "old"]),
    ("status=stale", ["old"]),
    ("status=alive", ["busy", "calm", "silent"]),
    ("admission=degraded", ["busy"]),
    ("admission=unknown", ["silent"]),
    ("reporting=1", ["busy", "calm", "old"]),
    ("q=BUS", ["busy"]),
    ("q=10.0.0.9", ["calm"]),
    ("q=nothing-like-this", []),
    ("sort=cpu", ["busy", "calm", "old", "silent"]),
    ("sort=cpu&desc=1", ["old", "calm", "busy", "silent"]),
    ("sort=age", ["busy", "calm", "silent", "old"]),
    ("sort=id&desc=1", ["silent", "old", "calm", "busy"]),
    ("status=bogus&admission=x&sort=bogus&per_page=7&page=-3", ["busy", "calm", "silent", "old"]),
])
def test_it_filters_searches_and_sorts(page, mixed_pool, query, expected):
    html = page(f"/pool/rows?{query}")
    assert row_ids(html) == expected
    if not expected:
        assert one(html, "pool-empty") == "No instance matches these filters."


def test_it_pages_through_a_large_pool(page, frozen, register_instance):
    for i in range(30):
        register_instance(f"i-{i:02d}")
    first = page("/pool/?sort=id")
    assert row_ids(first)[0] == "i-00" and len(row_ids(first)) == 25  # 25 a page unless asked
    assert "1–25 of 30" in text_of(first)
    second = page("/pool/rows?sort=id&page=2")
    assert row_ids(second) == [f"i-{i}" for i in range(25, 30)]
    assert "26–30 of 30" in text_of(second) and "page 2 of 2" in text_of(second)
    assert row_ids(page("/pool/rows?sort=id&page=99")) == row_ids(second)
    assert len(row_ids(page("/pool/rows?per_page=50"))) == 30
    # An integer in anything but ASCII digits is an unknown value: the first page, as for "two".
    for odd in ("２", "+2", " 2", "2_0", "two"):
        assert row_ids(page(f"/pool/rows?sort=id&page={odd}")) == row_ids(first), odd
    # The next-page link keeps the filters and works without JavaScript too.
    assert 'href="/pool/?sort=id&amp;page=2"' in first
    assert 'hx-get="/pool/rows?sort=id&amp;page=2"' in first
    assert 'hx-push-url="/pool/?sort=id&amp;page=2"' in first


def test_it_shows_instances_as_cards_on_request(page, frozen, gpu_host):
    gpu_host("gpu-1")
    html = page("/pool/rows?view=cards")
    assert 'class="card instance-card' in html and 'data-testid="pool-table"' not in html


def test_it_puts_the_filters_in_the_address_bar_when_the_form_asks(staff, frozen):
    asked = staff.get("/pool/rows?status=stale&q=x", headers={"HX-Request": "true", "HX-Trigger": "pool-filters"})
    assert asked["HX-Push-Url"] == "/pool/?status=stale&q=x"
    polled = staff.get("/pool/rows?status=stale", headers={"HX-Request": "true", "HX-Trigger": "pool-rows"})
    assert "HX-Push-Url" not in polled


def test_it_polls_the_rows_with_the_same_filters(page, frozen):
    html = page("/pool/rows?status=stale&sort=cpu")
    assert 'hx-get="/pool/rows?status=stale&amp;sort=cpu"' in html and 'hx-trigger="fw-refresh"' in html


def test_it_renders_the_summary_fragment_alone(page, frozen, cpu_host):
    cpu_host("cpu-1")
    html = page("/pool/summary")
    assert html.lstrip().startswith('<section id="pool-summary"')
    assert one(html, "pool-alive") == "1" and one(html, "pool-admission-state") == "accepting"
    assert "<html" not in html


def test_it_answers_the_pool_series_as_chart_columns(staff, frozen, cpu_host):
    cpu_host("cpu-1", cpu=20.0)
    record_pool(T0)
    frozen.shift(1)
    record_pool(T0 + 1)
    body = staff.get("/pool/series?range=15m").json()
    assert body["range"] == "15m" and body["range_s"] == 900 and body["resolution_s"] == 1.0
    assert body["t"] == [T0, T0 + 1] and body["cpu_avg"] == [20.0, 20.0]
    assert body["memory_used_ratio"] == [25.0, 25.0]  # drawn as percent
    assert body["gpu_util_avg"] == [None, None]  # a GPU-less pool: unknown, not 0
    assert body["alive"] == [1, 1] and body["stale"] == [0, 0]
    assert body["network_rx_mbps_total"] == [1.0, 1.0] and body["network_tx_mbps_total"] == [2.0, 2.0]
    assert staff.get("/pool/series?range=bogus").json()["range"] == "15m"


@pytest.mark.parametrize("path", ["/pool/", "/pool/rows", "/pool/summary", "/pool/rows?sort=cpu&status=alive&q=i"])
def test_it_reads_the_same_number_of_queries_for_3_or_40_instances(staff, frozen, cpu_host, path):
    def queries():
        with CaptureQueriesContext(connection) as captured:
            assert staff.get(path).status_code == 200
        return len(captured)

    for i in range(3):
        cpu_host(f"i-{i}")
    few = queries()
    for i in range(3, 40):
        cpu_host(f"i-{i}")
    assert queries() == few
    # session and user, the summary (3), status counts, the link, count and page, and on /pool/ the placement
    # board's read for its panel (on every request here, where its refresh setting is 0; under up at most every 0.25 s)
    # and the cached-tokens audit (its totals and its rows)
    assert few <= 12


@pytest.mark.parametrize("configured, shown", [
    (False, "capacity not configured"),  # an older proxy's default 8: 12 in flight is no share of anything
    (True, "capacity 8 · load 150.0 %"),
])
def test_it_shows_a_load_only_against_a_configured_capacity(page, frozen, settings, cpu_host, instance_heartbeat,
                                                             configured, shown):
    settings.FLEETWATCH_PROXY_CAPACITY, settings.FLEETWATCH_PROXY_CAPACITY_CONFIGURED = 8, configured
    cpu_host("cpu-1")
    instance_heartbeat("cpu-1", inflight=12, qps_1m=3.25)
    note = one(page("/pool/"), "pool-load-note")
    assert note == f"3.25 qps · {shown}"
    assert configured or "%" not in note


def test_a_pool_without_capacity_says_it_is_not_configured(page, frozen, cpu_host, instance_heartbeat):
    # Unset (this test environment's) and 0 are one thing: no capacity, no load ratio, one note (issue 47).
    cpu_host("cpu-1")
    instance_heartbeat("cpu-1", inflight=3)
    assert one(page("/pool/"), "pool-load-note") == "– qps · capacity not configured"


def test_a_stale_instance_shows_its_last_admission_state_as_not_current(page, frozen, cpu_host):
    cpu_host("old", admission="accepting")
    frozen.shift(45)  # past the TTL
    cpu_host("new", admission="accepting")
    for view in ("table", "cards"):
        html = page(f"/pool/?view={view}")
        old = html.split('data-instance-id="old"')[1].split('data-instance-id="new"')[0] if view == "cards" else \
            html.split('data-instance-id="old"')[1].split("</tr>")[0]
        assert 'data-admission-current="false"' in old and "last: accepting" in old, view
        assert "badge--ok" not in old, view  # no green badge for a host taking no work
        new = html.split('data-instance-id="new"')[1]
        assert '<span class="badge badge--ok" data-admission-current="true">accepting</span>' in new, view


def test_alive_means_one_thing_on_the_page(page, frozen, cpu_host):
    # The status card said "1 alive of 2 · 1 suspect" while the instances card beside it said "2 alive of 2": that
    # card counts SPEC 5's instances.alive, every instance within its TTL, suspect ones too (issue 47).
    cpu_host("quiet")
    frozen.shift(20)  # past its alive window (a heartbeat interval and a half), within its TTL: suspect
    cpu_host("fresh")
    text = text_of(page("/pool/"))
    assert "1 alive of 2" in text and "1 suspect" in text
    assert "2 within TTL of 2" in text
    assert text.count("alive of") == 1

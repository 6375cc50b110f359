"""/fleet/ and its fragments (SPEC 8): every proxy with liveness, pool admission, instances, bars and a trend."""

import re
from functools import partial

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import make_pool_resource
from tests.pages import conftest as pages
from tests.pages.conftest import one, text_of

pytestmark = pytest.mark.django_db


row_ids = partial(pages.row_ids, attribute="data-proxy-id")
row_of = partial(pages.row_of, attribute="data-proxy-id")


def gpu_pool(**extra):
    return make_pool_resource(utilization={"cpu_avg": 35.0, "gpu_util_avg": 80.0, "memory_used_ratio": 0.5,
                                           "gpu_count_total": 16}, **extra)


def test_it_shows_an_empty_fleet_as_a_page_that_says_so(page, frozen):
    html = page("/fleet/")
    assert "No proxies yet" in one(html, "fleet-empty") and one(html, "fleet-alive") == "0"


def test_it_lists_each_proxy_with_its_pool(page, frozen, register_proxy, proxy_heartbeat):
    register_proxy("pxy-gpu", pool_resource=gpu_pool(instances={"total": 4, "alive": 3, "with_resource": 3}))
    register_proxy("pxy-cpu", host="10.0.0.2", pool_resource=make_pool_resource(
        admission="degraded", utilization={"cpu_avg": 97.0, "gpu_util_avg": None, "memory_used_ratio": 0.1,
                                           "gpu_count_total": 0}))
    frozen.shift(3)
    proxy_heartbeat("pxy-gpu")
    html = page("/fleet/")
    assert row_ids(html) == ["pxy-cpu", "pxy-gpu"]
    _, gpu_row, _ = row_of(html, "pxy-gpu")
    assert gpu_row.startswith("alive pxy-gpu 10.0.0.1:8002 0 s ago accepting 3 / 4 35.0 % 50.0 % 80.0 % – – 3 s ago")
    classes, cpu_row, cells = row_of(html, "pxy-cpu")
    assert "degraded 2 / 2 97.0 % 10.0 % no GPU" in cpu_row and "bar--crit" in cells
    assert one(html, "fleet-alive") == "2"
    summary = text_of(html.split('id="fleet-summary"')[1].split("</section>")[0])
    assert "5 alive of 6" in summary
    assert "1 accepting 1 degraded 0 rejecting" in summary


def test_it_marks_a_stale_proxy(page, frozen, register_proxy):
    register_proxy("pxy-old", pool_resource=gpu_pool())
    frozen.shift(45)
    register_proxy("pxy-new", pool_resource=gpu_pool())
    html = page("/fleet/")
    classes, text, cells = row_of(html, "pxy-old")
    assert "is-stale" in classes and text.startswith("stale pxy-old") and "is-stale-data" in cells
    assert "1 stale" in html
    # Only alive proxies count in the fleet's instance totals.
    assert "2 alive of 2" in text_of(html.split('id="fleet-summary"')[1].split("</section>")[0])


def test_it_shows_a_dash_for_a_missing_or_malformed_summary(page, frozen, register_proxy):
    register_proxy("pxy-none")
    register_proxy("pxy-odd", pool_resource={"instances": "many", "utilization": {"cpu_avg": "hot"},
                                             "pool_admission_state": 7})
    html = page("/fleet/")
    assert row_of(html, "pxy-none")[1].endswith("0 s ago – – / – – – – – – – –")
    assert row_of(html, "pxy-odd")[1].endswith("0 s ago – – / – – – – – – 0 s ago –")  # sent, unreadable


def test_it_draws_a_trend_from_the_stored_summaries(page, frozen, register_proxy, proxy_heartbeat):
    register_proxy("pxy-a", pool_resource=gpu_pool())
    for cpu in (10.0, 50.0, 90.0):
        frozen.shift(30)
        proxy_heartbeat("pxy-a", pool_resource=make_pool_resource(cpu=cpu, gpu=20.0))
    _, _, cells = row_of(page("/fleet/"), "pxy-a")
    paths = re.findall(r'<path class="spark__line spark__line--(\d)" d="([^"]+)"/>', cells)
    assert [line for line, _ in paths] == ["0", "1"]
    assert len(paths[0][1].split()) == 4  # the register and three heartbeats, 30 s apart: four buckets


@pytest.mark.parametrize("query, expected", [
    ("", ["pxy-a", "pxy-b", "pxy-old"]),
    ("status=stale", ["pxy-old"]),
    ("admission=degraded", ["pxy-b"]),
    ("admission=unknown", ["pxy-old"]),
    ("q=10.0.0.7", ["pxy-b"]),
    ("sort=cpu", ["pxy-b", "pxy-a", "pxy-old"]),
    ("sort=cpu&desc=1", ["pxy-a", "pxy-b", "pxy-old"]),
    ("sort=instances", ["pxy-a", "pxy-b", "pxy-old"]),
    ("sort=id&desc=1", ["pxy-old", "pxy-b", "pxy-a"]),
])
def test_it_filters_searches_and_sorts(page, frozen, register_proxy, query, expected):
    register_proxy("pxy-old")
    frozen.shift(45)
    register_proxy("pxy-a", pool_resource=make_pool_resource(alive=9, total=9, cpu=20.0))
    register_proxy("pxy-b", host="10.0.0.7", pool_resource=make_pool_resource(alive=1, total=3, cpu=60.0,
                                                                               admission="degraded"))
    assert row_ids(page(f"/fleet/rows?{query}")) == expected


def test_it_puts_the_filters_in_the_address_bar_when_the_form_asks(staff, frozen):
    asked = staff.get("/fleet/rows?q=x", headers={"HX-Request": "true", "HX-Trigger": "fleet-filters"})
    assert asked["HX-Push-Url"] == "/fleet/?q=x"


def test_it_renders_the_summary_fragment_alone(page, frozen, register_proxy):
    register_proxy("pxy-a", pool_resource=gpu_pool())
    html = page("/fleet/summary")
    assert html.lstrip().startswith('<section id="fleet-summary"') and one(html, "fleet-alive") == "1"


@pytest.mark.parametrize("path", ["/fleet/", "/fleet/rows", "/fleet/summary"])
def test_it_reads_the_same_number_of_queries_for_2_or_30_proxies(staff, frozen, register_proxy, proxy_heartbeat, path):
    def queries():
        with CaptureQueriesContext(connection) as captured:
            assert staff.get(path).status_code == 200
        return len(captured)

    def add(count, start):
        for i in range(start, start + count):
            register_proxy(f"pxy-{i:02d}", pool_resource=gpu_pool())
            proxy_heartbeat(f"pxy-{i:02d}", pool_resource=gpu_pool())

    add(2, 0)
    few = queries()
    add(28, 2)
    # /fleet/ reads two more for its placement panel: the board of pools (on every request here, where its
    # refresh setting is 0) and the models the pools serve
    assert queries() == few <= (9 if path == "/fleet/" else 7)

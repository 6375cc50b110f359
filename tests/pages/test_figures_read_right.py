"""Figures that read as what they are (issue 31, point 4), in the rendered pages and the chart data.

A sub-second latency in milliseconds; a GPU memory bar that judges only a
host without an engine (vLLM reserves 90 % of GPU memory, so an engine host
is always near full: its KV cache bar is what tells of trouble); the pool's
admission counts labelled; an empty chart saying how long the host has been
silent.
"""

import re

import pytest

from proxy_app.ops.history import record_instances
from tests.factories import make_engine, make_gpu
from tests.pages.conftest import by_testid, text_of

pytestmark = pytest.mark.django_db

FULL_GPU = dict(used=74000.0, total=80000.0)  # 92.5 %


def bar_levels(html):
    """The level of every drawn bar, in page order, with the text beside it: [("crit", "92.5 %"), ...]."""
    return re.findall(r'<span class="bar bar--(\w+)" role="meter".*?<span class="meter__text">([^<]*)</span>',
                      html, re.S)


@pytest.fixture
def engine_and_plain_hosts(gpu_host, frozen):
    """Two GPU hosts at 92.5 % of GPU memory: "served" runs a vLLM with its KV cache 95 % full, "bare" none."""
    gpu_host("served", gpus=[make_gpu(0, **FULL_GPU)],
             engines=[make_engine(kv_cache_usage_ratio=0.95, itl_p50_s=0.028, ttft_p50_s=0.21, ttft_p95_s=1.5)])
    gpu_host("bare", gpus=[make_gpu(0, **FULL_GPU)])


def test_an_engines_latencies_under_a_second_read_in_milliseconds(page, engine_and_plain_hosts):
    card = by_testid(page("/pool/instances/served/"), "engine-card")[0]
    assert "ITL p50 28 ms" in card  # was "0.0 s"
    assert "TTFT p50 / p95 210 ms / 1.5 s" in card


def test_gpu_memory_is_judged_only_on_a_host_without_an_engine(page, engine_and_plain_hosts):
    served, bare = page("/pool/instances/served/"), page("/pool/instances/bare/")
    gpu_card = re.compile(r'data-testid="gpu-card">.*?</article>', re.S)
    assert ("plain", "92.5 %") in bar_levels(gpu_card.search(served).group(0))  # memory vLLM reserved: no alarm
    assert ("crit", "92.5 %") in bar_levels(gpu_card.search(bare).group(0))  # nothing reserved it: a problem
    engine_card = re.search(r'data-testid="engine-card">.*?</article>', served, re.S).group(0)
    assert bar_levels(engine_card) == [("crit", "95.0 %")]  # the engine's own KV cache is what is judged

    rows = page("/pool/")
    for instance_id, level in (("served", "plain"), ("bare", "crit")):
        row = re.search(rf'data-instance-id="{instance_id}">(.*?)</tr>', rows, re.S).group(1)
        assert (level, "92.5 %") in bar_levels(row), instance_id


def test_a_pool_with_engines_shows_its_gpu_memory_plain(page, frozen, gpu_host):
    gpu_host("served", gpus=[make_gpu(0, **FULL_GPU)], engines=[make_engine(kv_cache_usage_ratio=0.3)])
    utilisation = re.search(r'aria-label="Utilisation">.*?</section>', page("/pool/"), re.S).group(0)
    gpu_memory = re.search(r'GPU memory</p>(.*?)</div>', utilisation, re.S).group(1)
    assert bar_levels(gpu_memory) == [("plain", "92.5 %")]


def test_the_pools_admission_counts_say_what_they_count(page, frozen, gpu_host, cpu_host):
    cpu_host("a-1")
    cpu_host("a-2")
    cpu_host("d-1", admission="degraded")
    gpu_host("r-1", admission="rejecting")
    assert by_testid(page("/pool/"), "pool-admission-counts") == ["2 accepting 1 degraded 1 rejecting"]


def test_an_empty_chart_says_how_long_the_host_has_been_silent(staff, frozen, cpu_host):
    cpu_host("gone-1")
    record_instances()
    frozen.shift(53 * 60)  # gone for 53 minutes: nothing in the last 15
    body = staff.get("/pool/instances/gone-1/series?range=15m").json()
    assert body["t"] == [] and body["empty"] == "no report for 53 min"
    assert staff.get("/pool/instances/gone-1/series?range=1h").json()["empty"] is None  # its point is in the hour


def test_an_empty_chart_of_a_host_that_never_reported_says_so(staff, frozen, register_instance):
    register_instance("quiet-1")
    body = staff.get("/pool/instances/quiet-1/series?range=15m").json()
    assert body["t"] == [] and body["empty"] == "no report yet"


def test_the_api_docs_take_the_dashboards_theme(page):
    html = page("/api/docs/")
    assert 'localStorage.getItem("fw.theme")' in html  # the same choice as the dashboards, before the first paint
    assert re.search(r'<link rel="stylesheet" href="[^"]*fleetwatch/api-docs\.css">', html)
    assert "{#" not in html and text_of(html)  # no comment shows as text; still the Swagger page

"""Figures that read as what they are (issue 31, point 4), in the rendered pages and the chart data.

A sub-second latency in milliseconds; a GPU memory bar that judges only a
host without an engine (vLLM reserves 90 % of GPU memory, so an engine host
is always near full: its KV cache bar is what tells of trouble); the pool's
admission counts labelled; an empty chart saying how long the host has been
silent.
"""

import re

import pytest

from proxy_app.history import record_instances
from tests.factories import make_engine, make_gpu, make_snapshot
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

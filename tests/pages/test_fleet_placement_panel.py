"""The fleet page's "which pool would a request go to" panel: ``POST /v1/proxy/placement``'s answer (SPEC 14.3)."""

import re
from functools import partial

import pytest

from tests.factories import make_pool_resource
from tests.pages import conftest as pages
from tests.pages.conftest import one

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool(register_proxy, frozen):
    def _pool(proxy_id, port, saturation=None, models=("tiny",), alive=2, admission="accepting"):
        engine = {"saturation": saturation,
                  "models": [{"model": m, "instances": 1, "requests_waiting_total": 0} for m in models]}
        summary = make_pool_resource(alive=alive, total=alive, admission=admission, proxy_id=proxy_id,
                                     engine=engine if saturation is not None or models else None)
        register_proxy(proxy_id, host="10.1.0.1", port=port, pool_resource=summary)

    return _pool


candidates = partial(pages.row_ids, attribute="data-candidate")


def candidate_row(html, proxy_id):
    return pages.row_of(html, proxy_id, "data-candidate").text


def test_it_ranks_the_pools_for_a_model_as_the_api_does(page, api, pool, frozen):
    pool("busy", 8001, saturation=0.9)
    pool("small", 8002, saturation=0.2, alive=1)
    pool("big", 8003, saturation=0.2, alive=5)
    pool("other", 8004, saturation=0.1, models=("llama",))
    frozen.shift(3)
    html = page("/fleet/?model=tiny")
    assert candidates(html) == ["big", "small", "busy"]
    assert candidates(html) == [c["proxy_id"] for c in
                                api.post("/v1/proxy/placement", {"model": "tiny", "count": 5}).json()["candidates"]]
    assert one(html, "placement-verdict") == "accept" and one(html, "placement-reason") == "lowest_saturation"
    assert one(html, "placement-counts") == "4 considered · 3 eligible · excluded: model 1"
    assert candidate_row(html, "big") == "1 big 10.1.0.1:8003 20.0 % accepting 3.0 s saturation"
    assert 'href="/fleet/proxies/big/"' in html
    select = re.search(r'<select name="model".*?</select>', html, re.S).group(0)
    assert re.findall(r'<option value="([^"]*)"', select) == ["", "llama", "tiny"]
    assert '<option value="tiny" selected>' in select


def test_it_keeps_out_rejecting_pools_and_says_when_none_is_left(page, pool):
    pool("rejecting", 8001, saturation=0.1, admission="rejecting")
    html = page("/fleet/placement")
    assert one(html, "placement-verdict") == "unavailable"
    assert one(html, "placement-counts") == "1 considered · 0 eligible · excluded: rejecting 1"
    assert "No pool is eligible" in one(html, "placement-none")


def test_it_queues_when_every_pool_is_saturated_and_polls_the_same_question(page, pool):
    pool("a", 8001, saturation=1.0)
    html = page("/fleet/placement?model=tiny&count=3")
    assert one(html, "placement-verdict") == "queue" and candidates(html) == ["a"]
    assert 'hx-get="/fleet/placement?model=tiny&amp;count=3"' in html


def test_a_pool_without_saturation_ranks_last_with_its_reason(page, pool):
    pool("blind", 8001, saturation=None)
    pool("seen", 8002, saturation=0.5)
    html = page("/fleet/placement")
    assert candidates(html) == ["seen", "blind"]
    assert candidate_row(html, "blind").endswith("– accepting 0 ms no_saturation_signal")


def test_it_refuses_a_model_name_the_api_would_refuse_in_words(page, pool):
    pool("a", 8001, saturation=0.1)
    assert "model" in one(page("/fleet/placement?model=" + "m" * 256), "placement-error")

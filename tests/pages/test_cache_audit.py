"""The pool page's cached-tokens audit (SPEC 16.4): what the engines served from cache against what placement
predicted, per instance and for the pool, from the routers' feedback."""

import pytest

from tests.pages.conftest import by_testid, one, row_of

pytestmark = pytest.mark.django_db


def feedback(api, instance_id, **fields):
    assert api.post("/v1/placement/feedback", {"instance_id": instance_id, "outcome": "ok", **fields}).json()["ok"]


def test_the_pool_page_shows_the_ratio_per_instance_and_for_the_pool(api, register_instance, page):
    assert one(page("/pool/"), "cache-audit-empty")
    register_instance("a")
    register_instance("b", host="10.0.0.2")
    feedback(api, "a", cached_tokens=640, predicted_cached_tokens=640)
    feedback(api, "b", cached_tokens=128, predicted_cached_tokens=512)
    html = page("/pool/")
    assert one(html, "cache-audit-pool-ratio") == "0.667"  # 768 cached of 1,152 predicted
    assert by_testid(html, "cache-audit-ratio") == ["1.000", "0.250"]  # most predicted first: a, then b
    assert row_of(html, "b", "data-instance").text == "b 128 512 0.250"

"""Fenced instances marked wherever the pages show instances (SPEC 14.2): rows, cards, the instance page,
its status changes, the pool's "fenced" filter."""

import re

import pytest

from proxy_app.models import Instance
from proxy_app.placement.fence_store import effective_fence_q
from proxy_app.tasks import sweep_fences
from tests.factories import T0_MS, make_engine, make_failed_engine, make_gpu, make_snapshot
from tests.pages.conftest import by_testid, one, text_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def serving(register_instance, report, frozen):
    def _serving(instance_id, engine=None, gpus=(), host="10.0.0.1"):
        register_instance(instance_id, host=host)
        engine = engine if engine is not None else make_engine(requests_waiting=0, scraped_at_ms=T0_MS)
        assert report(instance_id, make_snapshot(engines=[engine], gpus=list(gpus))).status_code == 200

    return _serving


@pytest.fixture
def router_fenced(api, serving):
    """``a`` fenced by three router errors; ``b`` healthy."""
    serving("a")
    serving("b", host="10.0.0.2")
    for outcome in ("error", "timeout", "refused"):
        api.post("/v1/placement/feedback", {"instance_id": "a", "outcome": outcome})
    return "a"


def fenced_badges(html):
    """(instance id, title) of every row or card with a fenced badge."""
    marks = []
    for match in re.finditer(r'data-instance-id="([^"]+)"(.*?)(?:</tr>|</article>)', html, re.S):
        badge = re.search(r'<span class="badge badge--crit" title="([^"]*)" data-testid="fenced">fenced</span>',
                          match.group(2))
        if badge:
            marks.append((match.group(1), badge.group(1)))
    return marks


def test_it_marks_a_fenced_row_with_its_reason_in_the_table_and_the_cards(page, router_fenced):
    expected = [("a", "fenced: router errors in a row, the last: refused (router_refused)")]
    assert fenced_badges(page("/pool/")) == expected
    assert fenced_badges(page("/pool/rows?view=cards")) == expected
    assert "instance-card--fenced" in page("/pool/rows?view=cards")


def test_it_shows_the_fence_on_the_instance_page(page, frozen, router_fenced):
    frozen.shift(4)
    html = page("/pool/instances/a/")
    card = one(html, "instance-fence")
    assert card.startswith("Fence fenced router errors in a row, the last: refused router_refused since 4 s ago")
    assert "clean since 4 s ago: back after 10 s of quiet" in card
    assert one(html, "instance-router-errors") == "3 router errors in a row (fenced at 3)"
    assert one(page("/pool/instances/b/"), "instance-fence").startswith("Fence not fenced placement may send")


def test_it_writes_fence_and_unfence_changes_in_words(page, frozen, serving, router_fenced):
    for _ in range(11):
        frozen.shift(1)
        serving("a")
        sweep_fences()
    html = page("/pool/instances/a/")
    assert by_testid(html, "fence-change") == ["clean for 10 s", "router errors in a row, the last: refused"]
    changes = html.split('aria-label="Status changes"')[1].split("<tbody>")[1]
    rows = [text_of(row) for row in re.findall(r"<tr>(.*?)</tr>", changes, re.S)]
    assert rows[0].endswith("fenced → unfenced clean for 10 s recovered_after_10s")
    assert rows[1].endswith("alive → fenced router errors in a row, the last: refused router_refused")
    assert "not fenced" in one(html, "instance-fence")


def test_it_marks_an_engine_that_went_down_before_the_recorder_writes_the_fence(page, serving):
    serving("a")
    sweep_fences()  # a fence tick saw its ok engine
    serving("a", engine=make_failed_engine("unreachable", scraped_at_ms=T0_MS))
    assert fenced_badges(page("/pool/")) == [("a", "fenced: no engine is ok (unreachable) (engine_unreachable)")]
    assert "from its latest report" in one(page("/pool/instances/a/"), "instance-fence")


def test_the_fenced_filter_keeps_exactly_what_the_list_rows_call_fenced(page, serving, router_fenced,
                                                                        listed_instances):
    serving("gpu", gpus=[make_gpu(health="error")], host="10.0.0.3")
    serving("down")
    sweep_fences()
    serving("down", engine=make_failed_engine("timeout", scraped_at_ms=T0_MS))  # not swept yet
    serving("never", engine=make_failed_engine("unreachable", scraped_at_ms=T0_MS))  # never had an ok engine
    listed = {instance_id for instance_id, row in listed_instances().items() if row["fenced"]}
    assert listed == {"a", "gpu", "down"}
    assert set(Instance.objects.filter(effective_fence_q()).values_list("instance_id", flat=True)) == listed
    html = page("/pool/?fenced=1")
    assert set(re.findall(r'<tr class="[^"]*" data-instance-id="([^"]+)"', html)) == listed
    assert 'name="fenced" value="1" checked' in html
    assert "No instance matches these filters" in page("/pool/rows?fenced=1&q=never")

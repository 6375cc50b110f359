"""What a newcomer reads on the pages, in a real Chromium at 1440 px (issue 21, points 3 to 7).

Figures as shown: a load against a capacity nobody configured says so, a
stale host's admission state is marked as not current, the history says
how far apart its points really are and fits its axis to a young series,
the agent page names the agent ``up`` runs. And nothing is cut off, in
either theme: no table or page scrolls sideways, no cell's text overflows
its cell, and every chart's y axis is wider than its longest label.

These share the ``fleet`` of their module (tests/browser/conftest.py):
``FLEETWATCH_PROXY_CAPACITY`` unset, old-node-03 stale after one report,
pool-b heartbeating a summary with 148 Gbit/s of network.
"""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.charts import CHART_AXES, wait_for_charts

pytestmark = pytest.mark.live

# Elements whose text must fit: the table cells, every card's figures, badges, chart titles.
FITTING = "th, td, .badge, .card__value, .card__note, .card__title, .chart__title, .facts dd, .charts__note"

OVERFLOWS = """(selector) => {
    const clipped = [];
    for (const el of document.querySelectorAll(selector)) {
        if (!el.offsetParent) continue;  // not shown
        if (el.scrollWidth > el.clientWidth + 1) clipped.push(el.tagName + "." + el.className + ": " + el.textContent.trim().slice(0, 60));
    }
    for (const wrap of document.querySelectorAll(".table-wrap")) {
        if (wrap.scrollWidth > wrap.clientWidth + 1) clipped.push("table-wrap scrolls: " + wrap.scrollWidth + " > " + wrap.clientWidth);
    }
    const page = document.documentElement;
    if (page.scrollWidth > page.clientWidth + 1) clipped.push("page scrolls: " + page.scrollWidth + " > " + page.clientWidth);
    return clipped;
}"""

def pages_to_measure(fleet):
    return ["/pool/", "/pool/?view=cards", "/fleet/", f"/fleet/proxies/{fleet.proxy_id}/", "/fleet/proxies/pool-b/",
            "/pool/instances/gpu-node-01/", "/agent/"]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_nothing_is_clipped_at_1440_px(fleet, open_browser, theme):
    page = open_browser(theme).page
    page.goto("/pool/")  # measured with the widest badge there is: a stale host's "last: rejecting"
    expect(page.locator("[data-instance-id=old-node-03] [data-admission-current=false]")).to_be_visible()
    for path in pages_to_measure(fleet):
        page.goto(path)
        wait_for_charts(page)
        assert page.evaluate(OVERFLOWS, FITTING) == [], f"{path} ({theme})"
        for chart in page.evaluate(CHART_AXES):
            assert chart["labels"] and chart["widest"] <= chart["room"], f"{path} ({theme}): {chart}"


def test_the_y_axis_of_a_large_figure_shows_its_labels_whole(fleet, browser):
    page = browser.page
    page.goto("/fleet/proxies/pool-b/")  # 148,000 Mbit/s received
    wait_for_charts(page)
    network = next(c for c in page.evaluate(CHART_AXES) if c["title"].startswith("Network"))
    assert any(re.fullmatch(r"\d{3}k", label) for label in network["labels"]), network  # "150k", not "50.0k"
    assert network["widest"] <= network["room"]


def test_a_load_against_a_capacity_nobody_configured_says_so(fleet, browser):
    page = browser.page
    page.goto("/pool/")
    note = page.locator("[data-testid=pool-load-note]")
    expect(note).to_contain_text("capacity not configured")
    assert "%" not in note.inner_text()
    page.goto(f"/fleet/proxies/{fleet.proxy_id}/")  # the same pool, as the scheduler received it
    expect(page.locator("[data-testid=pool-load-note]")).to_contain_text("capacity not configured")
    expect(page.locator("[data-testid=declared-max-capacity]")).to_have_text("not declared")  # nothing configured: the link declares no capacity
    expect(page.locator("[data-testid=declared-kv-mem]")).to_have_text("not declared")
    expect(page.locator("[data-testid=declared-instance-count]")).to_contain_text("alive now")


def test_a_stale_host_shows_its_last_admission_state_as_not_current(fleet, browser):
    page = browser.page
    for path in ("/pool/", "/pool/?view=cards"):
        page.goto(path)
        old = page.locator("[data-instance-id=old-node-03] [data-admission-current]")
        expect(old).to_have_text("last: rejecting")  # its one report said rejecting; it is stale now
        expect(old).to_have_attribute("data-admission-current", "false")
        expect(old).to_have_class(re.compile(r"badge--muted"))
        live = page.locator("[data-instance-id=cpu-node-02] [data-admission-current]")
        expect(live).to_have_text("accepting")
        expect(live).to_have_class(re.compile(r"badge--ok"))
    page.goto("/pool/instances/old-node-03/")
    expect(page.locator("[data-testid=instance-admission]")).to_have_text("last: rejecting")


def test_the_history_says_how_far_apart_its_points_are_and_fits_a_young_series(fleet, browser):
    page = browser.page
    # The recorder writes the pool a point a second; the link heartbeats every 2 s (LIVE_ENV).
    # (A turn of the link takes a few tens of milliseconds besides its 2 s wait.)
    for path, step in (("/pool/", r"1\.0 s"), (f"/fleet/proxies/{fleet.proxy_id}/", r"2\.[0-2] s")):
        page.goto(path)
        expect(page.locator("[data-charts-note]")).to_have_text(re.compile(rf"^\d+ points, every {step}$"))
        wait_for_charts(page)
        span = page.evaluate("""() => {
            const group = window.fleetwatchCharts[0];
            const u = group.charts.find((c) => c.uplot).uplot;
            return {min: u.scales.x.min, max: u.scales.x.max, first: group.last.t[0], now: group.last.now,
                    range: group.last.range_s};
        }""")
        # Minutes old, not 15: the axis begins at the first point, not 15 minutes back.
        assert span["now"] - span["first"] < span["range"] / 2, span
        assert span["min"] == pytest.approx(min(span["first"], span["now"] - 60)), span
        assert span["max"] == pytest.approx(span["now"]), span


def test_the_freshness_figures_are_never_negative(fleet, browser):
    page = browser.page
    page.goto("/pool/")
    expect(page.locator("[data-testid=pool-load-note]")).to_be_visible()
    assert "-0.0" not in page.locator("main").inner_text()


def test_the_agent_page_says_first_that_ups_agent_runs(fleet, browser):
    page = browser.page
    page.goto("/agent/")
    ups = page.locator("[data-testid=agent-running][data-owner=up]")
    expect(ups).to_contain_text("running")
    expect(ups).to_contain_text("manage.py up's own agent")
    expect(ups).to_contain_text(fleet.server.agent_listen)
    assert page.locator("[data-testid=agent-running]").count() == 1
    # What runs comes before the form's own agent, which is stopped.
    expect(page.locator("[data-testid=agent-state]")).to_have_text("stopped")
    assert page.evaluate("""() => {
        const runs = document.querySelector("[data-testid=agents-running]");
        const own = document.querySelector("[data-testid=agent-state]");
        return Boolean(runs.compareDocumentPosition(own) & Node.DOCUMENT_POSITION_FOLLOWING);
    }""")

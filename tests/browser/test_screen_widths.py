"""Every page on a phone (390 px) and on a desktop (1440 px), in a real Chromium (issue 31, points 3 to 5).

No page scrolls sideways: long ids, headers and tables wrap or scroll inside
their own box. The pool's placement panel is measured with a destination
header of several candidates, the widest line it writes. And what the
pages say reads right: a chart's time labels stay whole, a chart of a host
that never reported says so, the API docs follow the dark theme, and the
placement panel says why it refuses a prompt of -5 tokens instead of keeping
its old answer.

This module has a ``fleet`` of its own (tests/browser/conftest.py), with
three more CPU hosts whose addresses make the destination header long.
"""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.charts import CHART_AXES, wait_for_charts
from tests.browser.conftest import Host

pytestmark = pytest.mark.live

WIDTHS = (390, 1440)
NOT_FOUND = "/pool/instances/no-such-instance/"
WIDE_HOSTS = [Host(f"wide-node-1{i}", f"10.100.104.21{i}", gpus=False) for i in range(3)]

# The page's width against the screen's, and what reaches past the screen's right edge outside a box
# that scrolls (the deepest such elements, to say what to mend).
PAST_THE_EDGE = """() => {
    const screen = document.documentElement.clientWidth;
    const scrolls = (el) => {  // inside a box that scrolls or clips, itself within the screen
        for (let up = el.parentElement; up; up = up.parentElement) {
            const x = getComputedStyle(up).overflowX;
            if (["auto", "scroll", "hidden"].includes(x) && up.getBoundingClientRect().right <= screen + 1) return true;
        }
        return false;
    };
    const past = [];
    for (const el of document.querySelectorAll("body *")) {
        const box = el.getBoundingClientRect();
        if (box.width === 0 || box.right <= screen + 1 || scrolls(el)) continue;
        if ([...el.children].some((child) => child.getBoundingClientRect().right > screen + 1)) continue;
        past.push(`${el.tagName.toLowerCase()}.${el.className}: ${Math.round(box.right)} px, ` +
                  `"${el.textContent.trim().slice(0, 50)}"`);
    }
    return {page: document.documentElement.scrollWidth, screen: screen, past: past.slice(0, 8)};
}"""


@pytest.fixture(scope="module")
def wide_hosts(fleet):
    """Three more hosts reporting, so the pool's placement answer names several addresses."""
    for port, host in enumerate(WIDE_HOSTS, start=18011):
        fleet.hosts.post("/v1/instance/register", {"instance_id": host.instance_id, "host": host.host, "port": port})
        fleet.hosts.hosts.append(host)
    return WIDE_HOSTS


def pages(fleet):
    return ["/fleet/", f"/fleet/proxies/{fleet.proxy_id}/", "/fleet/proxies/pool-b/", "/fleet/proxies/pool-gone/",
            "/pool/", "/pool/?view=cards", "/pool/instances/gpu-node-01/", "/pool/instances/cpu-node-02/",
            "/pool/instances/old-node-03/", "/agent/", "/api/docs/", NOT_FOUND]


@pytest.mark.parametrize("width", WIDTHS)
def test_no_page_is_wider_than_the_screen(fleet, wide_hosts, open_browser, width):
    opened = open_browser(width=width)
    opened.expected_missing.add(NOT_FOUND)  # the browser logs the 404 of the page itself
    page = opened.page
    page.goto("/pool/")
    destination = page.locator("[data-testid=placement-destination]")
    for host in wide_hosts:  # the widest line the panel writes: every candidate's address
        expect(destination).to_contain_text(host.host)
    for path in pages(fleet):
        page.goto(path)
        wait_for_charts(page)  # drawn at their own width
        measured = page.evaluate(PAST_THE_EDGE)
        assert measured["page"] <= width and measured["past"] == [], f"{path} at {width} px: {measured}"


@pytest.mark.parametrize("width", WIDTHS)
def test_every_time_label_of_a_chart_is_whole_and_one_names_the_day(fleet, open_browser, width):
    page = open_browser(width=width).page
    for path in ("/pool/", "/pool/instances/gpu-node-01/"):
        for range_name in ("15m", "24h"):
            page.goto(f"{path}?range={range_name}")
            expect(page.locator(".chart .uplot").first).to_be_visible()
            for chart in page.evaluate(CHART_AXES):
                assert chart["times"], chart
                for label in chart["times"]:
                    assert label["left"] >= 0 and label["right"] <= chart["canvas"], f"{path} {range_name}: {chart}"
                dated = [label for label in chart["times"] if "\n" in label["text"]]
                assert dated, f"{path} {range_name}: no label says the day: {chart}"


def test_a_chart_of_a_host_that_never_reported_says_so(fleet, browser):
    fleet.hosts.post("/v1/instance/register", {"instance_id": "quiet-node-05", "host": "10.0.4.15", "port": 8005})
    try:
        page = browser.page
        page.goto("/pool/instances/quiet-node-05/")
        expect(page.locator(".chart__empty").first).to_have_text("no report yet")
    finally:
        fleet.hosts.post("/v1/instance/unregister", {"instance_id": "quiet-node-05"})


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_api_docs_follow_the_theme(fleet, open_browser, theme):
    page = open_browser(theme).page
    page.goto("/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Fleetwatch API")
    assert page.evaluate("document.documentElement.dataset.theme") == theme
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    channels = [int(c) for c in re.findall(r"\d+", background)[:3]]
    assert (sum(channels) / 3 < 60) == (theme == "dark"), background
    inverted = page.evaluate("getComputedStyle(document.querySelector('.swagger-ui')).filter")
    assert ("invert" in inverted) == (theme == "dark"), inverted


@pytest.mark.parametrize("width", WIDTHS)
def test_the_placement_panel_says_why_it_refuses_a_prompt_and_drops_its_old_answer(fleet, open_browser, width):
    page = open_browser(width=width).page
    page.goto("/pool/")
    expect(page.locator("[data-testid=placement-verdict]")).to_be_visible()  # an answer to "any model"
    page.fill("[data-testid=placement-prompt]", "-5")
    error = page.locator("[data-testid=placement-error]")
    expect(error).to_have_text("Not a placement body: prompt tokens: Ensure this value is greater than or equal to 0.")
    expect(page.locator("[data-testid=placement-verdict]")).to_have_count(0)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.fill("[data-testid=placement-prompt]", "512")  # a good question answers again
    expect(page.locator("[data-testid=placement-verdict]")).to_be_visible()
    expect(error).to_have_count(0)

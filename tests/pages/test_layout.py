"""What every page shares: / by role, one layout with live controls and a theme toggle, no CDN."""

import re

import pytest

pytestmark = pytest.mark.django_db


def test_it_sends_home_to_the_fleet_when_this_process_is_the_scheduler(client, settings):
    settings.FLEETWATCH_ROLES = ["proxy", "scheduler"]
    response = client.get("/")
    assert (response.status_code, response["Location"]) == (302, "/fleet/")


def test_it_sends_home_to_the_pool_on_a_proxy_only_process(client, settings):
    settings.FLEETWATCH_ROLES = ["proxy"]
    response = client.get("/")
    assert (response.status_code, response["Location"]) == (302, "/pool/")


@pytest.mark.parametrize("path", ["/fleet/", "/pool/", "/agent/", "/pool/instances/nope/"])
def test_it_loads_nothing_from_outside_this_server(page, frozen, path):
    html = page(path, status=404 if "nope" in path else 200)
    assets = re.findall(r'<(?:script|link)[^>]+(?:src|href)="([^"]+)"', html)
    assert assets and all(asset.startswith("/static/") for asset in assets), assets
    assert "/static/vendor/htmx/htmx.min.js" in assets and "/static/fleetwatch/live.js" in assets


def test_it_puts_live_controls_and_the_theme_toggle_on_every_page(page, frozen):
    html = page("/pool/")
    for marker in ("data-live-controls", "data-live-toggle", "data-live-now", "data-theme-toggle",
                   '<option value="1">1 s</option><option value="3">3 s</option><option value="5">5 s</option>'
                   '<option value="10">10 s</option>'):
        assert marker in html


@pytest.mark.parametrize("path", [
    "/static/vendor/htmx/htmx.min.js", "/static/vendor/htmx/LICENSE",
    "/static/vendor/uplot/uPlot.iife.min.js", "/static/vendor/uplot/uPlot.min.css", "/static/vendor/uplot/LICENSE",
    "/static/fleetwatch/app.css", "/static/fleetwatch/live.js", "/static/fleetwatch/charts.js",
])
def test_it_serves_the_vendored_libraries_and_their_licences(client, path):
    response = client.get(path)
    assert response.status_code == 200
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert body


def test_it_answers_an_unknown_id_with_the_layout_and_status_404(page, frozen):
    html = page("/fleet/proxies/ghost/", status=404)
    assert html.startswith("<!doctype html>") and "No proxy <code class=\"mono\">ghost</code> is known here." in html


@pytest.mark.parametrize("entry_id", ["i-1", "hp_10.0.0.1:8000", "a/b c", "q?x=1#frag", "100%", "ünï", "x'&;=+"])
def test_it_links_rows_exactly_as_reverse_would(entry_id):
    from django.urls import reverse

    from controlplane.pages.layout import id_url

    assert id_url("pool-instance")(entry_id) == reverse("pool-instance", args=[entry_id])
    assert id_url("fleet-proxy")(entry_id) == reverse("fleet-proxy", args=[entry_id])

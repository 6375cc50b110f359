"""Who may see the dashboards (SPEC 8): staff when FLEETWATCH_AUTH is on, anyone when off; /agent/ staff always."""

from urllib.parse import quote

import pytest
from django.urls import NoReverseMatch, resolve, reverse

from tests.factories import make_pool_resource

pytestmark = pytest.mark.django_db

PAGES = [
    "/pool/", "/pool/summary", "/pool/rows", "/pool/series?range=15m", "/pool/placement?model=tiny",
    "/pool/instances/i-1/", "/pool/instances/i-1/live", "/pool/instances/i-1/series",
    "/fleet/", "/fleet/summary", "/fleet/rows", "/fleet/placement",
    "/fleet/proxies/pxy-a/", "/fleet/proxies/pxy-a/live", "/fleet/proxies/pxy-a/series",
]
AGENT_PAGES = ["/agent/", "/agent/status"]
DASHBOARD_VIEWS = {
    "pool", "pool-summary", "pool-rows", "pool-series", "pool-instance", "pool-instance-live", "pool-instance-series",
    "pool-placement", "fleet", "fleet-summary", "fleet-rows", "fleet-placement", "fleet-proxy", "fleet-proxy-live", "fleet-proxy-series",
    "local-agent", "local-agent-status", "local-agent-start", "local-agent-stop",
}


@pytest.fixture
def known(frozen, gpu_host, register_proxy):
    gpu_host("i-1")
    register_proxy("pxy-a", pool_resource=make_pool_resource())


def login_url(next_path):
    return f"/admin/login/?next={quote(next_path, safe='/')}"


@pytest.mark.parametrize("path", PAGES + AGENT_PAGES)
def test_it_sends_an_anonymous_user_to_the_login_page_when_auth_is_on(client, auth_on, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"] == login_url(path)


@pytest.mark.parametrize("path", ["/pool/rows?q=gpu", "/pool/instances/i-1/live", "/fleet/summary", "/agent/status"])
def test_it_sends_a_polling_fragment_s_whole_page_to_login(client, auth_on, path):
    response = client.get(path, headers={"HX-Request": "true", "HX-Current-URL": "http://testserver/pool/?q=gpu"})
    assert response.status_code == 200
    assert response["HX-Redirect"] == login_url("/pool/?q=gpu")
    assert response.content == b""


def test_it_sends_the_chart_loader_to_login_rather_than_a_login_form_as_json(client, auth_on):
    response = client.get("/pool/series?range=1h", headers={"HX-Request": "true", "HX-Current-URL": "http://testserver/pool/"})
    assert response["HX-Redirect"] == login_url("/pool/")


@pytest.mark.parametrize("path", PAGES + AGENT_PAGES)
def test_it_sends_a_user_who_is_not_staff_to_login(client, django_user_model, known, auth_on, path):
    client.force_login(django_user_model.objects.create_user("viewer", password="x", is_staff=False))
    assert client.get(path).status_code == 302


@pytest.mark.parametrize("path", PAGES + AGENT_PAGES)
def test_it_shows_every_page_to_staff_when_auth_is_on(staff, known, auth_on, path):
    assert staff.get(path).status_code == 200


@pytest.mark.parametrize("path", PAGES)
def test_it_shows_every_page_to_anyone_when_auth_is_off(client, known, auth_off, path):
    assert client.get(path).status_code == 200


@pytest.mark.parametrize("path", AGENT_PAGES)
def test_it_keeps_local_agent_control_to_staff_even_when_auth_is_off(client, auth_off, path):
    response = client.get(path)
    assert response.status_code == 302 and response["Location"] == login_url(path)


@pytest.mark.parametrize("path", ["/agent/start", "/agent/stop"])
def test_it_starts_and_stops_nothing_for_an_anonymous_post(client, auth_off, var_dir, path):
    response = client.post(path, {"listen": "127.0.0.1:9299"})
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
    assert not (var_dir / "local-agent.json").exists()


def test_it_guards_every_dashboard_view_with_the_one_access_rule():
    views = {}
    for name in DASHBOARD_VIEWS:
        try:
            path = reverse(name)
        except NoReverseMatch:
            path = reverse(name, args=["some-id"])
        views[name] = resolve(path).func
    missing = sorted(name for name, view in views.items() if not hasattr(view, "dashboard_staff_always"))
    assert missing == []
    staff_only = sorted(name for name, view in views.items() if view.dashboard_staff_always)
    assert staff_only == ["local-agent", "local-agent-start", "local-agent-status", "local-agent-stop"]

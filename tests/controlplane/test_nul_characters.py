"""A NUL character in any text of a request is refused before a query sees it, on every URL (issue 20).

PostgreSQL cannot compare text holding a NUL (the query fails: a 500),
SQLite can: every URL of the app, API, pages and admin, found in its URL
configuration, is asked with a NUL in each id of its path (404) and in the
value or name of each query parameter any view reads (400), as a staff user
with a session and as an API client with a token. Run on both databases.
"""

import pytest
from django.urls import get_resolver

from tests.factories import make_snapshot

pytestmark = pytest.mark.both_entry_points

# Every query parameter a view or page of the app reads (the API's lists and
# histories, the pages' filters, the admin's search and filters).
QUERY_NAMES = ("instance_id", "proxy_id", "range", "include_dead", "limit", "offset", "q", "status", "admission",
               "sort", "desc", "page", "per_page", "view", "reporting", "within", "o", "p")
NUL_VALUE = "a%00b"


def every_url(resolver=None, prefix="/"):
    """(name, path format, parameter names) of every named URL, namespaces (the admin) included."""
    resolver = resolver or get_resolver()
    urls = []
    for name in [key for key in resolver.reverse_dict if isinstance(key, str)]:
        form, params = resolver.reverse_dict.getlist(name)[0][0][0]
        urls.append((name, prefix + form, params))
    for namespace, (sub_prefix, sub_resolver) in resolver.namespace_dict.items():
        urls += [(f"{namespace}:{name}", form, params)
                 for name, form, params in every_url(sub_resolver, prefix + sub_prefix)]
    return sorted(urls)


URLS = every_url()
URLS_WITH_IDS = [url for url in URLS if url[2]]


def url_of(form, params, nul_in=None):
    return form % {param: (NUL_VALUE if param == nul_in else "known-id") for param in params}


def assert_refused(response, status, error):
    assert response.status_code == status, (response.status_code, response.content[:300])
    assert response.json()["ok"] is False
    assert response.json()["error"] == error
    return response.json()


@pytest.fixture
def staff(admin_client):
    """A logged-in staff user's browser (a session cookie: the pages and the API's staff lane)."""
    return admin_client


@pytest.fixture
def known_rows(api, frozen):
    """An instance and a proxy under the id the URLs carry, so a refusal is not a plain not-found."""
    api.post("/v1/instance/register", {"instance_id": "known-id", "host": "10.0.0.5", "port": 8000})
    api.post("/v1/instance/resource_snapshot", {"instance_id": "known-id", "snapshot": make_snapshot()})
    api.post("/v1/proxy/register", {"proxy_id": "known-id", "host": "10.0.0.2", "port": 8002})


def test_it_finds_the_api_the_pages_and_the_admin_in_the_url_configuration():
    names = {name for name, _, _ in URLS}
    assert {"instance-history", "proxy-history", "pool", "pool-rows", "pool-instance-live", "fleet",
            "fleet-proxy-series", "admin:index", "admin:login"} <= names
    assert len(URLS_WITH_IDS) >= 6


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "form", "params"), URLS_WITH_IDS, ids=[url[0] for url in URLS_WITH_IDS])
def test_it_answers_404_to_a_nul_in_an_id_of_the_path(name, form, params, staff, api, known_rows):
    for param in params:
        path = url_of(form, params, nul_in=param)
        assert_refused(staff.get(path), 404, "not_found")
        assert_refused(api.get(path), 404, "not_found")


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "form", "params"), URLS, ids=[url[0] for url in URLS])
def test_it_answers_400_to_a_nul_in_a_query_value_or_name(name, form, params, staff, api):
    path = url_of(form, params)
    for query in QUERY_NAMES:
        for client in (staff, api):
            body = assert_refused(client.get(f"{path}?range=15m&{query}={NUL_VALUE}"), 400, "validation_error")
            assert body["detail"] == {query: ["NUL characters are not allowed."]}
    body = assert_refused(staff.get(f"{path}?bad%00name=1"), 400, "validation_error")
    assert body["detail"] == {"bad\\x00name": ["NUL characters are not allowed."]}


@pytest.mark.django_db
def test_it_answers_the_reported_urls_as_before_without_the_nul(staff, api, known_rows):
    """The issue's 16 URLs, once with a NUL (refused) and once with plain text (answered)."""
    assert api.get("/v1/instance/history", instance_id="known-id", range="15m").status_code == 200
    assert api.get("/v1/proxy/history", proxy_id="known-id", range="15m").status_code == 200
    for path in ("/pool/?q=known", "/pool/rows?q=known", "/fleet/?q=known", "/fleet/rows?q=known",
                 "/pool/instances/known-id/", "/pool/instances/known-id/live", "/pool/instances/known-id/series",
                 "/fleet/proxies/known-id/", "/fleet/proxies/known-id/live", "/fleet/proxies/known-id/series?range=15m"):
        assert staff.get(path).status_code == 200, path
        assert staff.get(path.replace("known", "kn%00own")).status_code in (400, 404), path


@pytest.mark.django_db
def test_it_refuses_a_nul_in_a_form_value_and_writes_nothing(client):
    from django.contrib.auth.models import User

    response = client.post("/admin/login/", {"username": "ad\x00min", "password": "secret"})
    body = assert_refused(response, 400, "validation_error")
    assert body["detail"] == {"username": ["NUL characters are not allowed."]}
    assert not User.objects.exists()


@pytest.mark.django_db
def test_it_drops_a_cookie_holding_a_nul_and_answers_the_page(staff, client):
    staff.cookies["junk"] = "a\x00b"
    assert staff.get("/pool/").status_code == 200
    client.cookies["sessionid"] = "x\x00y"
    response = client.get("/pool/")
    assert response.status_code == 302  # an anonymous visitor is sent to the login page
    assert "/admin/login/" in response["Location"]

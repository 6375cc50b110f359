"""The API lane: a token call without a session cookie passes the page-only middleware by."""

import pytest
from django.contrib.auth.models import User
from django.test import RequestFactory

from controlplane.api.middleware import takes_api_lane

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path, lane", [
    ("/v1/instance/list", True), ("/debug/pool_resource", True), ("/healthz", True), ("/metrics", True),
    ("/api/schema/", True), ("/pool/", False), ("/admin/", False), ("/static/fleetwatch/app.css", False),
    ("/v1x", False),
])
def test_it_sends_api_paths_down_the_lane(path, lane):
    assert takes_api_lane(RequestFactory().get(path)) is lane


def test_it_keeps_a_request_with_a_session_cookie_off_the_lane(settings):
    request = RequestFactory().get("/v1/instance/list")
    request.COOKIES[settings.SESSION_COOKIE_NAME] = "abc"
    assert takes_api_lane(request) is False


def test_it_answers_a_token_call_without_a_logged_in_user_or_messages(api, frozen):
    response = api.get("/v1/instance/list")
    assert response.status_code == 200
    assert not hasattr(response.wsgi_request, "_messages")
    assert not isinstance(response.wsgi_request.user, User)  # the token's user, set by the API view


def test_it_still_runs_the_pages_middleware_for_pages(client):
    client.force_login(User.objects.create_user("op", password="pw", is_staff=True))
    response = client.get("/pool/")
    assert response.status_code == 200
    assert response.wsgi_request.user.username == "op"


def test_it_still_knows_a_staff_user_reading_the_api_in_a_browser(api, client, frozen):
    client.force_login(User.objects.create_user("op", password="pw", is_staff=True))
    response = api.as_anonymous().get("/v1/instance/list")
    assert response.status_code == 200
    assert response.wsgi_request.user.username == "op"

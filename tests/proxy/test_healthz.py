"""GET /healthz (SPEC 3)."""

import pytest

pytestmark = pytest.mark.django_db


def test_it_answers_ok_with_the_instance_ttl(api):
    response = api.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is True
    assert body["ttl_s"] == 30
    assert isinstance(body["ttl_s"], int)


def test_it_follows_the_ttl_setting(api, settings):
    settings.FLEETWATCH_INSTANCE_TTL_S = 12
    assert api.get("/healthz").json()["ttl_s"] == 12


def test_it_answers_without_touching_the_database(api, django_assert_num_queries):
    with django_assert_num_queries(0):
        assert api.get("/healthz").status_code == 200

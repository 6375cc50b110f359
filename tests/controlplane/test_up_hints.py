"""What ``manage.py up`` tells a newcomer about logging in to the pages."""

import pytest
from django.contrib.auth import get_user_model

from controlplane.ops.up import login_hint

pytestmark = pytest.mark.django_db


def test_it_says_how_to_create_the_first_staff_user(settings):
    settings.FLEETWATCH_AUTH = True
    get_user_model().objects.create_user("visitor", password="not-staff")  # not staff: cannot open the pages

    assert "./fw manage createsuperuser" in login_hint()


def test_it_says_nothing_once_a_staff_user_exists(settings):
    settings.FLEETWATCH_AUTH = True
    get_user_model().objects.create_superuser("admin", "admin@example.invalid", "a-password")

    assert login_hint() is None


def test_an_inactive_staff_user_does_not_count(settings):
    settings.FLEETWATCH_AUTH = True
    get_user_model().objects.create_superuser("gone", "gone@example.invalid", "a-password", is_active=False)

    assert login_hint() is not None


def test_it_says_nothing_with_auth_off(settings):
    settings.FLEETWATCH_AUTH = False

    assert login_hint() is None


def test_its_banner_says_metrics_needs_a_token_while_auth_is_on(settings):
    # /metrics answers 401 without one; the banner listed it bare (issue 47).
    from controlplane.ops.up import banner

    settings.FLEETWATCH_AUTH = True
    lines = banner(["proxy"], "http://127.0.0.1:8000", "http://127.0.0.1:8001", None)
    assert "metrics: http://127.0.0.1:8000/metrics (with a token: ./fw manage create_token --scope read" in lines[1]
    assert lines[2] == "  routers (placement, feedback): http://127.0.0.1:8001"
    settings.FLEETWATCH_AUTH = False
    assert banner(["proxy"], "http://127.0.0.1:8000", None, None)[1].endswith("metrics: http://127.0.0.1:8000/metrics")

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

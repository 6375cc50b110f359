"""The admin's "View on site" button of an instance or a proxy opens its dashboard page."""

import pytest

from tests.factories import make_pool_resource

pytestmark = pytest.mark.django_db


def test_it_links_an_instance_in_the_admin_to_its_dashboard_page(staff, frozen, cpu_host):
    cpu_host("hp_10.0.0.1:8000")
    html = staff.get("/admin/proxy_app/instance/hp_10.0.0.1:8000/change/").content.decode()
    assert 'href="/pool/instances/hp_10.0.0.1:8000/" class="viewsitelink"' in html


def test_it_links_a_proxy_in_the_admin_to_its_dashboard_page(staff, frozen, register_proxy):
    register_proxy("pxy-a", pool_resource=make_pool_resource())
    html = staff.get("/admin/scheduler_app/proxy/pxy-a/change/").content.decode()
    assert 'href="/fleet/proxies/pxy-a/" class="viewsitelink"' in html

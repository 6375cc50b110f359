"""GET /metrics on the Scheduler role: each proxy up or not (SPEC 11)."""

import pytest

from tests.factories import make_pool_resource
from tests.proxy.test_metrics import scrape, value

pytestmark = pytest.mark.django_db


def test_it_tells_which_proxies_are_up(api, register_proxy, frozen):
    register_proxy("pxy-a", pool_resource=make_pool_resource())
    frozen.shift(40)
    register_proxy("pxy-b")
    samples = scrape(api)
    assert value(samples, "fleetwatch_proxy_up", proxy_id="pxy-b") == 1
    assert value(samples, "fleetwatch_proxy_up", proxy_id="pxy-a") == 0

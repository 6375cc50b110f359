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


def test_it_exports_every_live_pools_figures_from_the_summary_it_stores(api, register_proxy, frozen):
    register_proxy("pxy-a", pool_resource=make_pool_resource(alive=3, cpu=20.0, admission="degraded",
                                                             instances={"alive": 3, "accepting": 1, "degraded": 1,
                                                                        "rejecting": 0, "missing_resource": 1}))
    register_proxy("pxy-b", pool_resource=make_pool_resource(gpu=50.0))
    frozen.shift(2)
    samples = scrape(api)
    assert value(samples, "fleetwatch_fleet_pool_instances_alive", proxy_id="pxy-a") == 3
    assert value(samples, "fleetwatch_fleet_pool_instances_reporting", proxy_id="pxy-a", admission_state="degraded") == 1
    assert value(samples, "fleetwatch_fleet_pool_instances_missing_resource", proxy_id="pxy-a") == 1
    assert value(samples, "fleetwatch_fleet_pool_admission_state", proxy_id="pxy-a", state="degraded") == 1
    assert value(samples, "fleetwatch_fleet_pool_cpu_utilization_ratio", proxy_id="pxy-a") == 0.2
    assert value(samples, "fleetwatch_fleet_pool_gpu_utilization_ratio", proxy_id="pxy-b") == 0.5
    assert value(samples, "fleetwatch_fleet_pool_summary_age_seconds", proxy_id="pxy-b") == 2.0


def test_a_stale_proxys_old_summary_is_not_exported(api, register_proxy, frozen):
    register_proxy("pxy-a", pool_resource=make_pool_resource())
    frozen.shift(40)
    samples = scrape(api)
    assert value(samples, "fleetwatch_proxy_up", proxy_id="pxy-a") == 0
    assert not [name for name, labels in samples if name.startswith("fleetwatch_fleet_pool")]

"""Large numbers a client may send come back as numbers, never a 500 (issue 20, found on PostgreSQL).

PostgreSQL's jsonb keeps a number as a decimal: ``1e20`` in a pool summary
or a ``meta`` comes back as the integer 100000000000000000000, which orjson
cannot write (64 bits). Every read of the API and the pages is asked after
writes carrying such numbers, on both databases.
"""

import pytest

from tests.factories import make_gpu, make_snapshot

pytestmark = [pytest.mark.django_db, pytest.mark.both_entry_points]

API_READS = ("/v1/instance/list", "/v1/proxy/list", "/debug/pool_resource", "/debug/instance_resources",
             "/debug/proxy_pool_resources", "/metrics")
PAGES = ("/pool/", "/pool/instances/big/", "/pool/instances/big/live", "/fleet/", "/fleet/proxies/big/",
         "/fleet/proxies/big/live")


@pytest.mark.parametrize("big", [1e20, -1e300, 1e300, 2.0**70])
def test_it_answers_every_read_after_writes_with_huge_numbers(api, admin_client, big):
    assert api.post("/v1/instance/register", {"instance_id": "big", "host": "h", "port": 1,
                                              "meta": {"x": big}}).status_code == 200
    snapshot = make_snapshot(cpu=50.0, gpus=[make_gpu(0, avg=50.0)])
    snapshot["extra_figure"] = big
    api.post("/v1/instance/resource_snapshot", {"instance_id": "big", "snapshot": snapshot, "metadata": {"x": big}})
    api.post("/v1/instance/heartbeat", {"instance_id": "big", "inflight": 1, "qps_1m": 1.0})
    assert api.post("/v1/proxy/register", {"proxy_id": "big", "host": "h", "port": 1, "meta": {"y": big},
                                           "pool_resource": {"x": big}}).status_code == 200
    api.post("/v1/proxy/heartbeat", {"proxy_id": "big", "pool_resource": {"utilization": {"cpu_avg": 1.0}, "x": big}})
    for path in API_READS:
        assert api.get(path).status_code == 200, path
    for path in API_READS + PAGES:
        assert admin_client.get(path).status_code == 200, path
    meta = next(row for row in api.get("/v1/proxy/list").json() if row["proxy_id"] == "big")["meta"]
    assert meta == {"y": big}

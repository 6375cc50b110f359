"""POST /v1/proxy/heartbeat (SPEC 6, and SPEC 12's partial load updates)."""

import pytest

from scheduler_app.models import PoolResourceSample, Proxy, ProxyStatusChange
from tests.factories import T0, make_pool_resource

pytestmark = pytest.mark.django_db


def test_it_answers_ok_and_refreshes_last_seen(register_proxy, proxy_heartbeat, frozen):
    register_proxy("pxy-a")
    frozen.shift(4)

    response = proxy_heartbeat("pxy-a")

    assert response.status_code == 200
    assert response.json() == {"ok": True}
    proxy = Proxy.objects.get(pk="pxy-a")
    assert proxy.last_seen_at == T0 + 4
    assert proxy.registered_at == T0


@pytest.mark.parametrize("extra", [{}, {"meta_patch": {"a": 1}}, {"pool_resource": {"instances": {}}}])
def test_it_answers_an_unknown_proxy_with_the_compat_404_and_stores_nothing(proxy_heartbeat, frozen, extra):
    response = proxy_heartbeat("pxy-unknown", inflight=1, **extra)

    assert response.status_code == 404
    assert response.json() == {"detail": "proxy_id not registered"}
    assert not Proxy.objects.exists()
    assert not PoolResourceSample.objects.exists()
    assert not ProxyStatusChange.objects.exists()


def test_it_stores_the_load_fields_sent(register_proxy, proxy_heartbeat, frozen):
    register_proxy("pxy-a")

    proxy_heartbeat("pxy-a", inflight=3, qps_1m=1.5, gpu_util=40.0)

    proxy = Proxy.objects.get(pk="pxy-a")
    assert (proxy.inflight, proxy.qps_1m, proxy.gpu_util) == (3, 1.5, 40.0)


@pytest.mark.parametrize(
    "sent, expected",
    [
        ({"qps_1m": 2.0}, (3, 2.0, 40.0)),
        ({"inflight": 0}, (0, 1.5, 40.0)),
        ({"gpu_util": 99.5}, (3, 1.5, 99.5)),
        ({}, (3, 1.5, 40.0)),
    ],
)
def test_it_changes_only_the_load_fields_present(register_proxy, proxy_heartbeat, frozen, sent, expected):
    register_proxy("pxy-a")
    proxy_heartbeat("pxy-a", inflight=3, qps_1m=1.5, gpu_util=40.0)

    proxy_heartbeat("pxy-a", **sent)

    proxy = Proxy.objects.get(pk="pxy-a")
    assert (proxy.inflight, proxy.qps_1m, proxy.gpu_util) == expected


def test_it_takes_an_explicit_null_load_field_as_unknown(register_proxy, proxy_heartbeat, frozen):
    register_proxy("pxy-a")
    proxy_heartbeat("pxy-a", inflight=3, qps_1m=1.5)

    proxy_heartbeat("pxy-a", inflight=None)

    proxy = Proxy.objects.get(pk="pxy-a")
    assert (proxy.inflight, proxy.qps_1m) == (None, 1.5)


def test_it_merges_meta_patch_into_meta(register_proxy, proxy_heartbeat, frozen):
    register_proxy("pxy-a", meta={"a": 1, "b": 2})

    proxy_heartbeat("pxy-a", meta_patch={"b": 3, "c": {"d": 4}})

    assert Proxy.objects.get(pk="pxy-a").meta == {"a": 1, "b": 3, "c": {"d": 4}}


@pytest.mark.parametrize("patch", [None, {}])
def test_it_leaves_meta_alone_on_an_empty_or_null_meta_patch(register_proxy, proxy_heartbeat, frozen, patch):
    register_proxy("pxy-a", meta={"a": 1})

    proxy_heartbeat("pxy-a", meta_patch=patch)

    assert Proxy.objects.get(pk="pxy-a").meta == {"a": 1}


def test_it_stores_a_pool_resource_with_the_receive_time_and_keeps_a_sample(register_proxy, proxy_heartbeat, frozen):
    register_proxy("pxy-a")
    frozen.shift(5)
    summary = make_pool_resource(alive=1, total=2, cpu=12.5)

    proxy_heartbeat("pxy-a", pool_resource=summary)

    proxy = Proxy.objects.get(pk="pxy-a")
    assert proxy.pool_resource == summary
    assert proxy.pool_resource_reported_at == T0 + 5
    sample = PoolResourceSample.objects.get()
    assert (sample.proxy_id, sample.t, sample.cpu_avg) == ("pxy-a", T0 + 5, 12.5)


@pytest.mark.parametrize("again", [{}, {"pool_resource": None}])
def test_it_keeps_the_previous_pool_resource_on_a_heartbeat_without_one(register_proxy, proxy_heartbeat, frozen, again):
    register_proxy("pxy-a")
    summary = make_pool_resource()
    proxy_heartbeat("pxy-a", pool_resource=summary)
    frozen.shift(5)

    proxy_heartbeat("pxy-a", inflight=2, **again)

    proxy = Proxy.objects.get(pk="pxy-a")
    assert proxy.pool_resource == summary
    assert proxy.pool_resource_reported_at == T0
    assert proxy.last_seen_at == T0 + 5
    assert PoolResourceSample.objects.count() == 1


def test_it_appends_one_sample_per_heartbeat_with_a_summary(register_proxy, proxy_heartbeat, frozen):
    register_proxy("pxy-a")

    for step in range(3):
        frozen.shift(5)
        proxy_heartbeat("pxy-a", pool_resource=make_pool_resource(cpu=float(step)))

    assert list(PoolResourceSample.objects.order_by("t").values_list("t", "cpu_avg")) == [
        (T0 + 5, 0.0), (T0 + 10, 1.0), (T0 + 15, 2.0),
    ]
    assert Proxy.objects.get(pk="pxy-a").pool_resource["utilization"]["cpu_avg"] == 2.0


def test_it_revives_a_stale_proxy_on_a_heartbeat_with_a_recorded_change(register_proxy, proxy_heartbeat, frozen):
    register_proxy("pxy-a")
    frozen.shift(60)
    Proxy.objects.sweep(T0 + 60)

    proxy_heartbeat("pxy-a", meta_patch={"restarted": True})

    proxy = Proxy.objects.get(pk="pxy-a")
    assert proxy.status == "alive"
    assert proxy.meta == {"restarted": True}
    change = ProxyStatusChange.objects.order_by("-id").first()
    assert (change.old_status, change.new_status, change.reason, change.at) == ("stale", "alive", "heartbeat", T0 + 60)


def test_it_records_no_change_on_a_heartbeat_of_an_alive_proxy(register_proxy, proxy_heartbeat, frozen):
    register_proxy("pxy-a")

    proxy_heartbeat("pxy-a", pool_resource=make_pool_resource(), meta_patch={"x": 1})

    assert ProxyStatusChange.objects.count() == 1  # the register

"""Manager methods behind the periodic tasks: sweep, delete_expired, prune."""

import pytest

from controlplane.endpoints import managers as liveness_managers
from scheduler_app.history import PROXY_POOLS
from scheduler_app.models import PoolResourceSample, Proxy, ProxyStatusChange
from tests.factories import T0, make_pool_resource

pytestmark = pytest.mark.django_db

TTL = 30  # FLEETWATCH_PROXY_TTL_S
INTERVAL = 5  # FLEETWATCH_PROXY_HEARTBEAT_S; alive window: 7.5 s


def sweep(now, **kwargs):
    return Proxy.objects.sweep(now, **kwargs)


def changes(proxy_id="pxy-a"):
    return list(
        ProxyStatusChange.objects.filter(proxy_id=proxy_id).order_by("id")
        .values_list("old_status", "new_status", "reason", "at")
    )


def test_it_sweeps_alive_to_suspect_to_stale_recording_each_change(register_proxy, frozen):
    register_proxy("pxy-a")

    assert sweep(T0 + 7) == 0
    assert sweep(T0 + 8) == 1
    assert Proxy.objects.get(pk="pxy-a").status == "suspect"
    assert sweep(T0 + 30) == 0
    assert sweep(T0 + 31) == 1
    assert Proxy.objects.get(pk="pxy-a").status == "stale"
    assert changes() == [
        ("", "alive", "registered", T0),
        # Each stamped with the moment it happened, not with the sweep's time.
        ("alive", "suspect", "missed heartbeats", T0 + 7.5),
        ("suspect", "stale", "missed heartbeats", T0 + TTL),
    ]


def test_a_late_sweep_records_the_suspect_spell_at_its_moment(register_proxy, frozen):
    register_proxy("pxy-a")

    assert sweep(T0 + 100) == 1
    assert changes()[1:] == [("alive", "suspect", "missed heartbeats", T0 + 7.5),
                             ("suspect", "stale", "missed heartbeats", T0 + TTL)]


def test_it_records_once_when_swept_twice(register_proxy, frozen):
    register_proxy("pxy-a")

    assert sweep(T0 + 8) == 1
    assert sweep(T0 + 8) == 0
    assert len(changes()) == 2


def test_it_records_nothing_for_a_sweep_that_loses_the_race(register_proxy, frozen, monkeypatch):
    register_proxy("pxy-a")
    decide = liveness_managers.liveness.status_at
    other_sweeps = []

    def another_sweep_claims_first(*args):
        # Runs between this sweep's read and its claim, as a second worker would.
        monkeypatch.setattr(liveness_managers.liveness, "status_at", decide)
        other_sweeps.append(sweep(T0 + 8))
        return decide(*args)

    monkeypatch.setattr(liveness_managers.liveness, "status_at", another_sweep_claims_first)

    assert sweep(T0 + 8) == 0
    assert other_sweeps == [1]
    assert [c[1] for c in changes()] == ["alive", "suspect"]


def test_it_keeps_a_heartbeat_that_lands_between_read_and_claim(register_proxy, frozen, monkeypatch):
    register_proxy("pxy-a")
    decide = liveness_managers.liveness.status_at

    def heartbeat_lands_first(*args):
        Proxy.objects.heartbeat("pxy-a", T0 + 8)
        return decide(*args)

    monkeypatch.setattr(liveness_managers.liveness, "status_at", heartbeat_lands_first)

    assert sweep(T0 + 8) == 0
    proxy = Proxy.objects.get(pk="pxy-a")
    assert (proxy.status, proxy.last_seen_at) == ("alive", T0 + 8)
    assert len(changes()) == 1


def test_it_sweeps_in_batches(register_proxy, frozen):
    for name in ("pxy-a", "pxy-b", "pxy-c"):
        register_proxy(name)

    assert sweep(T0 + 8, batch=2) == 2
    assert sweep(T0 + 8, batch=2) == 1
    assert set(Proxy.objects.values_list("status", flat=True)) == {"suspect"}


def test_it_deletes_proxies_unseen_for_the_retention(register_proxy, frozen):
    register_proxy("pxy-a", pool_resource=make_pool_resource())
    frozen.shift(100)
    register_proxy("pxy-b")
    sweep(T0 + 3600)
    now = T0 + 86400 + 50

    assert Proxy.objects.delete_expired(now, retention_s=86400) == 1
    assert Proxy.objects.delete_expired(now, retention_s=86400) == 0

    assert list(Proxy.objects.values_list("proxy_id", flat=True)) == ["pxy-b"]
    assert changes("pxy-a")[-1] == ("stale", "expired", "retention passed", T0 + 86400)
    # The trend history outlives the proxy until it is pruned.
    assert PoolResourceSample.objects.filter(proxy_id="pxy-a").exists()


def test_it_prunes_samples_older_than_the_window(register_proxy, proxy_heartbeat, frozen, settings):
    register_proxy("pxy-a", pool_resource=make_pool_resource())
    for _ in range(2):
        frozen.shift(10)
        proxy_heartbeat("pxy-a", pool_resource=make_pool_resource())

    settings.FLEETWATCH_HISTORY_FULL_S = 15
    assert PROXY_POOLS.prune(T0 + 30) == 2
    assert PROXY_POOLS.prune(T0 + 30) == 0

    assert list(PoolResourceSample.objects.values_list("t", flat=True)) == [T0 + 20]
    # The latest summary on the proxy itself is not history.
    assert Proxy.objects.get(pk="pxy-a").pool_resource_reported_at == T0 + 20


def test_it_prunes_old_status_changes(register_proxy, frozen):
    register_proxy("pxy-a")
    sweep(T0 + 8)

    assert ProxyStatusChange.objects.prune(T0 + 10, keep_s=5) == 1

    assert [c[1] for c in changes()] == ["suspect"]

"""The proxy → scheduler link, one turn at a time, against a real scheduler over HTTP.

``live_server`` serves this test database (both roles) on a real socket, so
the link's requests are real HTTP; the random part of the backoff is injected.
"""

import pytest
import requests

from controlplane.api.tokens import ApiToken
from controlplane.endpoints.liveness import Status
from proxy_app.models import Instance, SchedulerLinkState
from proxy_app.pool.answers import link_status
from proxy_app.pool.link import ProxyLink
from scheduler_app.models import PoolResourceSample, Proxy

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def proxy_settings(settings):
    settings.FLEETWATCH_PROXY_ID = "pool-a"
    settings.FLEETWATCH_PROXY_HEARTBEAT_S = 2.0
    settings.FLEETWATCH_SCHEDULER_TOKEN = ApiToken.objects.issue("link", "proxy")[1]
    return settings


@pytest.fixture
def link(live_server, proxy_settings):
    return ProxyLink(live_server.url, rand=lambda: 0.5, timeout=5)


def closed_port_url():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_it_registers_first_with_a_pool_summary(link):
    delay = link.step()
    assert delay == 2.0  # the interval the scheduler answered
    proxy = Proxy.objects.get(pk="pool-a")
    assert proxy.pool_resource["proxy_id"] == "pool-a"
    assert proxy.pool_resource["schema_version"] == 1
    assert proxy.max_capacity == 0  # FLEETWATCH_PROXY_CAPACITY unset: declared by nobody


def test_it_heartbeats_with_a_fresh_summary(link):
    link.step()
    Instance.objects.register(instance_id="i-1", host="h", port=1, endpoints=[], tags=[], weight=1.0, meta={},
                              capabilities=None, now=__import__("time").time())
    assert link.step() == 2.0
    proxy = Proxy.objects.get(pk="pool-a")
    assert proxy.pool_resource["instances"]["alive"] == 1
    assert PoolResourceSample.objects.filter(proxy_id="pool-a").count() == 2


def test_one_hosts_huge_inflight_does_not_get_its_pools_heartbeats_refused(link):
    from controlplane.api.fields import MAX_INFLIGHT

    now = __import__("time").time()
    link.step()
    for name in ("i-1", "i-2"):
        Instance.objects.register(instance_id=name, host="h", port=1, endpoints=[], tags=[], weight=1.0, meta={},
                                  capabilities=None, now=now)
        Instance.objects.heartbeat(name, now, {"inflight": MAX_INFLIGHT})
    assert link.step() == 2.0
    state = SchedulerLinkState.objects.get(pk="pool-a")
    assert state.consecutive_failures == 0
    assert state.last_action == "heartbeat"
    proxy = Proxy.objects.get(pk="pool-a")
    assert proxy.inflight == MAX_INFLIGHT
    assert proxy.pool_resource["instances"]["alive"] == 2


def test_it_sends_meta_patch_only_when_the_meta_changed(link, proxy_settings):
    link.step()
    summary = {"load": {"inflight_total": None, "qps_1m_total": None}, "utilization": {"gpu_util_avg": None}}
    assert "meta_patch" not in link.heartbeat_body(summary)
    proxy_settings.FLEETWATCH_PROXY_CAPACITY = 16
    assert link.heartbeat_body(summary)["meta_patch"]["capacity"] == 16


def test_it_tells_the_scheduler_whether_the_capacity_was_configured(link, proxy_settings):
    proxy_settings.FLEETWATCH_PROXY_CAPACITY_CONFIGURED = False  # unset
    link.step()
    assert Proxy.objects.get(pk="pool-a").meta["capacity_configured"] is False
    summary = {"load": {"inflight_total": None, "qps_1m_total": None}, "utilization": {"gpu_util_avg": None}}
    proxy_settings.FLEETWATCH_PROXY_CAPACITY, proxy_settings.FLEETWATCH_PROXY_CAPACITY_CONFIGURED = 64, True
    assert link.heartbeat_body(summary)["meta_patch"]["capacity_configured"] is True


def test_it_re_registers_at_once_when_the_scheduler_forgot_it(link):
    link.step()
    Proxy.objects.unregister("pool-a", 0.0)
    assert link.step() == 0.0  # the 404: no wait before registering again
    assert not link.registered
    assert link.step() == 2.0
    assert Proxy.objects.filter(pk="pool-a", status=Status.ALIVE).exists()


def test_it_backs_off_with_jitter_capped_at_the_interval_when_unreachable(proxy_settings):
    link = ProxyLink(closed_port_url(), rand=lambda: 1.0, timeout=1)
    delays = [link.step() for _ in range(6)]
    # Never registered: the heartbeat setting (2 s) is the interval that caps it.
    assert delays == [0.5, 1.0, 2.0, 2.0, 2.0, 2.0]
    state = SchedulerLinkState.objects.get(pk="pool-a")
    assert state.consecutive_failures == 6
    assert state.registered is False
    assert "ConnectionError" in state.last_error


@pytest.mark.parametrize("interval_s, delays", [(8.0, [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]), (0.5, [0.5] * 6)])
def test_its_backoff_cap_follows_the_heartbeat_setting(proxy_settings, interval_s, delays):
    proxy_settings.FLEETWATCH_PROXY_HEARTBEAT_S = interval_s
    link = ProxyLink(closed_port_url(), rand=lambda: 1.0, timeout=1)
    assert [link.step() for _ in range(6)] == delays


def test_its_outcome_shows_on_debug_status(link, live_server):
    link.step()
    token = ApiToken.objects.issue("reader", "read")[1]
    status = requests.get(live_server.url + "/debug/status", headers={"Authorization": f"Bearer {token}"},
                          timeout=5).json()["scheduler_link"]
    assert status["registered"] is True
    assert status["last_action"] == "register"
    assert status["consecutive_failures"] == 0
    assert status["last_ok_at"] is not None
    assert link_status("pool-a") == status


def test_it_unregisters_on_shutdown(link):
    link.step()
    assert link.unregister() is True
    assert not Proxy.objects.filter(pk="pool-a").exists()


@pytest.mark.parametrize("rand, first, fourth, twentieth", [(0.0, 0.25, 2.0, 15.0), (1.0, 0.5, 4.0, 30.0)])
def test_it_grows_its_backoff_from_half_a_second_keeping_half_fixed(proxy_settings, rand, first, fourth, twentieth):
    link = ProxyLink(closed_port_url(), rand=lambda: rand)
    link.interval = 30.0  # as a Scheduler's register answer would set it
    delays = [link.failed("heartbeat", "unreachable") for _ in range(20)]
    assert (delays[0], delays[3], delays[19]) == (first, fourth, twentieth)


def test_it_waits_out_a_database_outage_saying_so_once_and_once_that_it_is_over(link, monkeypatch, caplog):
    import logging

    from django.db import OperationalError, connection

    from controlplane.db_outage import Outage
    from proxy_app.pool import link as link_module

    def unavailable(execute, sql, params, many, context):
        raise OperationalError("connection failed: Connection refused\n\tIs the server running on that host?")

    monkeypatch.setattr(link_module, "OUTAGE", Outage(link_module.OUTAGE.consequence))
    with caplog.at_level(logging.INFO), connection.execute_wrapper(unavailable):
        # Nothing to send, nowhere to record: a heartbeat interval until it looks again.
        assert [link.step() for _ in range(3)] == [2.0] * 3
    assert not SchedulerLinkState.objects.exists()
    assert link.step() == 2.0 and link.registered
    messages = [(record.levelname, record.getMessage(), record.exc_info) for record in caplog.records
                if record.name == "fleetwatch.database"]
    assert messages[0] == ("WARNING", "database unavailable (connection failed: Connection refused): "
                                      "the scheduler link waits until it is back", None)
    assert [message[:1] + message[2:] for message in messages[1:]] == [("WARNING", None)]
    assert messages[1][1].startswith("database reachable again after")
    assert not [record for record in caplog.records if record.exc_info], caplog.text

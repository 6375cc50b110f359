"""A scheduler-only process and proxy-only processes, and the faults between them."""

import pytest
import requests

from tests.factories import make_snapshot
from tests.live import free_port, wait_for

pytestmark = pytest.mark.live

HEARTBEAT_S = 2.0
# Instances here never heartbeat and restarts on a loaded machine are slow:
# TTLs far longer than any test, so "alive" only ever depends on the link.
# The link's behaviour against time (backoff capped at the interval) is
# tested with an injected clock in tests/proxy/test_link.py; here the waits
# only have generous deadlines.
TTLS = {"FLEETWATCH_INSTANCE_TTL_S": "3600", "FLEETWATCH_PROXY_TTL_S": "3600",
        "FLEETWATCH_PROXY_HEARTBEAT_S": str(HEARTBEAT_S)}
DEADLINE_S = 90


def start_proxy(servers, proxy_id, scheduler_port):
    return servers(roles="proxy", env={
        **TTLS,
        "FLEETWATCH_SCHEDULER_URL": f"http://127.0.0.1:{scheduler_port}",
        "FLEETWATCH_PROXY_ID": proxy_id,
    }).start()


def start_scheduler(servers, port=None):
    return servers(roles="scheduler", port=port, env=TTLS).start()


def add_reporting_instance(proxy, instance_id, port=8000):
    assert proxy.post("/v1/instance/register", {"instance_id": instance_id, "host": "10.0.0.1", "port": port}).ok
    reply = proxy.post("/v1/instance/resource_snapshot", {"instance_id": instance_id, "snapshot": make_snapshot()})
    assert reply.json() == {"ok": True}


def listed(scheduler, proxy_id, alive_instances=None):
    for entry in scheduler.get("/v1/proxy/list"):
        if entry["proxy_id"] == proxy_id and entry["is_alive"]:
            if alive_instances is None or (entry["pool_resource"] or {}).get("instances", {}).get("alive") == alive_instances:
                return entry
    return None


def test_it_shows_two_proxies_with_their_own_summaries(servers):
    scheduler = start_scheduler(servers)
    pool_a = start_proxy(servers, "pool-a", scheduler.port)
    pool_b = start_proxy(servers, "pool-b", scheduler.port)
    add_reporting_instance(pool_a, "a-1")
    add_reporting_instance(pool_b, "b-1")
    add_reporting_instance(pool_b, "b-2", port=8001)

    assert wait_for(lambda: listed(scheduler, "pool-a", alive_instances=1), timeout_s=DEADLINE_S, message="pool-a")
    assert wait_for(lambda: listed(scheduler, "pool-b", alive_instances=2), timeout_s=DEADLINE_S, message="pool-b")
    # The scheduler role is not mounted on a proxy-only process.
    assert requests.get(pool_a.url + "/v1/proxy/list", timeout=5).status_code == 404


def test_it_catches_up_when_the_scheduler_comes_back(servers):
    scheduler_port = free_port()
    proxy = start_proxy(servers, "pool-a", scheduler_port)
    add_reporting_instance(proxy, "a-1")  # accepted while the scheduler is down
    link = wait_for(lambda: (proxy.get("/debug/status")["scheduler_link"] or {}).get("consecutive_failures"),
                    timeout_s=DEADLINE_S, message="a failed link attempt")
    assert link >= 1

    scheduler = start_scheduler(servers, port=scheduler_port)
    entry = wait_for(lambda: listed(scheduler, "pool-a", alive_instances=1),
                     timeout_s=DEADLINE_S, message="the proxy to be registered and current")
    assert entry["pool_resource"]["proxy_id"] == "pool-a"
    status = proxy.get("/debug/status")["scheduler_link"]
    assert status["registered"] is True and status["consecutive_failures"] == 0


def test_it_re_registers_when_the_scheduler_forgets_it(servers):
    scheduler = start_scheduler(servers)
    proxy = start_proxy(servers, "pool-a", scheduler.port)
    first = wait_for(lambda: listed(scheduler, "pool-a"), timeout_s=DEADLINE_S, message="first registration")

    # The scheduler drops the proxy: the next heartbeat gets 404 and re-registers.
    assert scheduler.post("/v1/proxy/unregister", {"proxy_id": "pool-a"}).json() == {"ok": True}
    again = wait_for(lambda: (entry := listed(scheduler, "pool-a")) and entry["registered_at"] > first["registered_at"]
                     and entry, timeout_s=DEADLINE_S, message="re-registration")
    assert again["registered_at"] > first["registered_at"]

    # A wiped scheduler database takes the same path.
    scheduler.restart(wipe=True)
    assert wait_for(lambda: listed(scheduler, "pool-a"), timeout_s=DEADLINE_S,
                    message="re-registration after the wipe")
    assert proxy.get("/debug/status")["scheduler_link"]["registered"] is True


def test_it_keeps_instances_and_their_resources_across_a_proxy_restart(servers):
    scheduler = start_scheduler(servers)
    proxy = start_proxy(servers, "pool-a", scheduler.port)
    add_reporting_instance(proxy, "a-1")
    proxy.restart()
    [row] = proxy.get("/v1/instance/list")
    assert row["instance_id"] == "a-1" and row["resource"]["cpu_util"] == 10.0
    assert wait_for(lambda: listed(scheduler, "pool-a", alive_instances=1), timeout_s=DEADLINE_S,
                    message="the scheduler to be current")

"""Nothing acknowledged is lost across a restart."""

import pytest

from tests.factories import make_snapshot

pytestmark = pytest.mark.live

# The instance must still be alive after the restart however long a loaded
# machine takes to start the server again; the default 30 s TTL could run out.
LIVE_ENV = {"FLEETWATCH_INSTANCE_TTL_S": "3600"}


def test_it_keeps_a_cacheroute_report_across_a_restart(servers):
    server = servers(roles="proxy", env=LIVE_ENV).start()
    assert server.post("/v1/instance/register", {"instance_id": "vllm-7", "host": "10.1.0.7", "port": 8000}).ok
    snapshot = make_snapshot(cpu=33.5)
    metadata = {
        "reported_instance_id": "vllm-7",
        "report_monotonic_ms": 123456,
        "report_wall_time_ms": 1767225600123,
        "agent_snapshot_timestamp_ms": 1767225600000,
    }
    reply = server.post("/v1/instance/resource_snapshot",
                        {"instance_id": "vllm-7", "snapshot": snapshot, "metadata": metadata})
    assert reply.status_code == 200 and reply.json() == {"ok": True}

    server.restart()

    [row] = server.get("/v1/instance/list")
    assert row["instance_id"] == "vllm-7"
    assert row["is_alive"] is True
    assert row["resource"]["raw_resource"] == snapshot
    assert row["resource"]["cpu_util"] == 33.5
    assert row["resource"]["reported_instance_id"] == "vllm-7"
    assert row["resource"]["resource_report_monotonic_ms"] == 123456
    assert row["resource"]["resource_report_wall_time_ms"] == 1767225600123
    assert row["resource"]["agent_snapshot_timestamp_ms"] == 1767225600000

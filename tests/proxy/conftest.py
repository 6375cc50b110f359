"""Actors of the Proxy tests: instances that register, heartbeat and report over the API."""

import pytest

from tests.factories import make_gpu, make_snapshot


@pytest.fixture
def register_instance(api):
    """Register one instance through the API; returns its id."""

    def _register(instance_id="i-1", host="10.0.0.1", port=8000, **fields):
        response = api.post("/v1/instance/register", {"instance_id": instance_id, "host": host, "port": port, **fields})
        assert response.status_code == 200, response.content
        return response.json()["instance_id"]

    return _register


@pytest.fixture
def report(api):
    """POST one snapshot for an instance the way the CacheRoute reporter does."""

    def _report(instance_id="i-1", snapshot=None, seq=None, **metadata):
        meta = {
            "reported_instance_id": instance_id,
            "report_monotonic_ms": 1000,
            "report_wall_time_ms": 1767225600000,
            "agent_snapshot_timestamp_ms": 1767225600000,
            **metadata,
        }
        if seq is not None:
            meta["report_seq"] = seq
        body = {"instance_id": instance_id, "snapshot": snapshot or make_snapshot(), "metadata": meta}
        return api.post("/v1/instance/resource_snapshot", body)

    return _report


@pytest.fixture
def instance_heartbeat(api):
    """POST one instance heartbeat with the given load fields; returns the response."""

    def _heartbeat(instance_id="i-1", **load):
        return api.post("/v1/instance/heartbeat", {"instance_id": instance_id, **load})

    return _heartbeat


@pytest.fixture
def listed_instances(api):
    """The rows of ``/v1/instance/list`` keyed by instance_id."""

    def _listed(**params):
        response = api.get("/v1/instance/list", **params)
        assert response.status_code == 200, response.content
        return {row["instance_id"]: row for row in response.json()}

    return _listed


@pytest.fixture
def pool_resource(api):
    """The summary ``/debug/pool_resource`` answers now."""

    def _pool_resource():
        response = api.get("/debug/pool_resource")
        assert response.status_code == 200, response.content
        body = response.json()
        assert body["ok"] is True
        return body["pool_resource"]

    return _pool_resource


@pytest.fixture
def gpu_host(register_instance, report):
    """A registered instance on a host with GPUs that has reported once."""

    def _gpu_host(instance_id, gpus=None, admission="accepting", **snapshot):
        register_instance(instance_id)
        gpus = [make_gpu(0)] if gpus is None else gpus
        response = report(instance_id, make_snapshot(gpus=gpus, admission=admission, **snapshot))
        assert response.json() == {"ok": True}, response.content
        return instance_id

    return _gpu_host


@pytest.fixture
def cpu_host(gpu_host):
    """A registered instance on a host without GPUs that has reported once."""

    def _cpu_host(instance_id, admission="accepting", **snapshot):
        return gpu_host(instance_id, gpus=[], admission=admission, **snapshot)

    return _cpu_host

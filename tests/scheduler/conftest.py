"""Actors of the scheduler tests: a proxy that registers and heartbeats over the API."""

import pytest


def make_pool_resource(alive=2, total=2, cpu=20.0, gpu=50.0, memory_used_ratio=0.25, admission="accepting", **extra):
    """A pool_resource (SPEC 5 shape, trimmed) as a proxy sends it."""
    summary = {
        "schema_version": 1,
        "proxy_id": "pxy-a",
        "generated_at": 1767225600.0,
        "ttl_s": 30,
        "instances": {"total": total, "alive": alive, "stale": total - alive},
        "utilization": {"cpu_avg": cpu, "gpu_util_avg": gpu, "memory_used_ratio": memory_used_ratio},
        "pool_admission_state": admission,
    }
    summary.update(extra)
    return summary


@pytest.fixture
def register_proxy(api):
    """Register one proxy through the API; returns its id."""

    def _register(proxy_id="pxy-a", host="10.0.0.1", port=8002, **fields):
        response = api.post("/v1/proxy/register", {"proxy_id": proxy_id, "host": host, "port": port, **fields})
        assert response.status_code == 200, response.content
        return response.json()["proxy_id"]

    return _register


@pytest.fixture
def heartbeat(api):
    """POST one proxy heartbeat; returns the response."""

    def _heartbeat(proxy_id="pxy-a", **fields):
        return api.post("/v1/proxy/heartbeat", {"proxy_id": proxy_id, **fields})

    return _heartbeat


@pytest.fixture
def listed(api):
    """The rows of ``/v1/proxy/list`` as a dict by proxy_id."""

    def _listed(**params):
        response = api.get("/v1/proxy/list", **params)
        assert response.status_code == 200, response.content
        return {row["proxy_id"]: row for row in response.json()}

    return _listed

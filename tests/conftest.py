"""Shared actors and factories for the control-plane tests.

Time is frozen with ``time_machine`` (``frozen`` fixture); the API is driven
through Django's test client with JSON bodies (``api`` fixture).
"""

import json

import pytest
import time_machine

# A fixed "now" far from any epoch edge: 2026-01-01T00:00:00Z.
T0 = 1767225600.0


class JsonClient:
    """Django's test client speaking JSON both ways."""

    def __init__(self, client):
        self.client = client

    def post(self, path, body=None, raw=None, **extra):
        data = raw if raw is not None else json.dumps(body if body is not None else {})
        return self.client.post(path, data=data, content_type="application/json", **extra)

    def get(self, path, **params):
        return self.client.get(path, data=params)


@pytest.fixture
def api(client):
    return JsonClient(client)


@pytest.fixture
def frozen():
    """Time stopped at T0; ``frozen.shift(seconds)`` moves it forward."""
    with time_machine.travel(T0, tick=False) as traveller:
        yield traveller


def make_snapshot(cpu=10.0, used_mb=2000.0, total_mb=8000.0, free_mb=6000.0, gpus=(), admission="accepting",
                  network=({"iface": "eth0", "rx_mbps": 1.0, "tx_mbps": 2.0, "speed_mbps": 10000},),
                  timestamp_ms=1767225600000, **extra):
    """A ``resource_snapshot_v1`` body as the agent sends it."""
    snapshot = {
        "schema_version": "resource_snapshot_v1",
        "agent_version": "test",
        "instance_id": "i-1",
        "timestamp_ms": timestamp_ms,
        "hostname": "gpu-host-1",
        "devices": {
            "cpu": {"utilization_pct": cpu, "load1": 0.5, "load5": 0.4, "load15": 0.3},
            "memory": {"used_mb": used_mb, "total_mb": total_mb, "free_mb": free_mb},
            "network": list(network),
            "gpu": list(gpus),
        },
        "runtime": {},
        "capacity_hint": {
            "memory_free_ratio": round(free_mb / total_mb, 4) if free_mb is not None and total_mb else None,
            "admission_state": admission,
        },
    }
    snapshot.update(extra)
    return snapshot


def make_gpu(index=0, avg=50.0, current=None, peak=None, used=1000.0, total=80000.0, ok=True, **extra):
    gpu = {
        "index": index,
        "uuid": f"GPU-{index}",
        "name": "NVIDIA H100",
        "utilization_pct": avg,
        "utilization_pct_current": avg if current is None else current,
        "utilization_pct_avg": avg,
        "utilization_pct_max": avg if peak is None else peak,
        "utilization_sample_count": 5,
        "utilization_window_ms": 5000,
        "utilization_sample_ok": ok,
        "utilization_source": "nvml",
        "memory_used_mb": used,
        "memory_total_mb": total,
        "memory_free_mb": None if used is None or total is None else total - used,
        "temperature_c": 40,
        "power_w": 100.0,
        "health": "ok",
    }
    gpu.update(extra)
    return gpu


@pytest.fixture
def register(api):
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


# --- proxy actors (added with the proxy tests) ------------------------------------


@pytest.fixture
def heartbeat(api):
    """POST one instance heartbeat with the given load fields; returns the response."""

    def _heartbeat(instance_id="i-1", **load):
        return api.post("/v1/instance/heartbeat", {"instance_id": instance_id, **load})

    return _heartbeat


@pytest.fixture
def listed(api):
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
def gpu_host(register, report):
    """A registered instance on a host with GPUs that has reported once."""

    def _gpu_host(instance_id, gpus=None, admission="accepting", **snapshot):
        register(instance_id)
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

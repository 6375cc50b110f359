"""Actors of the Scheduler tests: proxies that register and heartbeat over the API."""

import pytest


@pytest.fixture
def register_proxy(api):
    """Register one proxy through the API; returns its id."""

    def _register(proxy_id="pxy-a", host="10.0.0.1", port=8002, **fields):
        response = api.post("/v1/proxy/register", {"proxy_id": proxy_id, "host": host, "port": port, **fields})
        assert response.status_code == 200, response.content
        return response.json()["proxy_id"]

    return _register


@pytest.fixture
def proxy_heartbeat(api):
    """POST one proxy heartbeat; returns the response."""

    def _heartbeat(proxy_id="pxy-a", **fields):
        return api.post("/v1/proxy/heartbeat", {"proxy_id": proxy_id, **fields})

    return _heartbeat


@pytest.fixture
def listed_proxies(api):
    """The rows of ``/v1/proxy/list`` as a dict by proxy_id."""

    def _listed(**params):
        response = api.get("/v1/proxy/list", **params)
        assert response.status_code == 200, response.content
        return {row["proxy_id"]: row for row in response.json()}

    return _listed

"""Actors shared by every control-plane test: a JSON API client and a frozen clock.

Time is frozen with ``time_machine`` (``frozen`` fixture); the API is driven
through Django's test client with JSON bodies (``api`` fixture). Request
bodies come from ``tests/factories.py``; each control plane's actors live in
its own ``conftest.py``.
"""

import json

import pytest
import time_machine

from tests.factories import T0


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

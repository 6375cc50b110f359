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
    """Django's test client speaking JSON both ways, as a client with the right token.

    Auth is on in the tests as it is by default: each request carries a
    token of the scope its endpoint needs (``read`` for GETs, ``proxy`` for
    the Scheduler's writes, ``instance`` for the Proxy's), issued on first
    use. ``as_anonymous()`` sends none; an explicit ``HTTP_AUTHORIZATION``
    wins.
    """

    def __init__(self, client, with_tokens=True):
        self.client = client
        self.with_tokens = with_tokens
        self.tokens = {}

    def as_anonymous(self):
        return JsonClient(self.client, with_tokens=False)

    def token(self, scope):
        from controlplane.api.auth import verify_token
        from controlplane.api.tokens import ApiToken

        if scope not in self.tokens:
            self.tokens[scope] = ApiToken.objects.issue(f"tests-{scope}", scope)[1]
            # Verified once now, as a server that already saw it: query counts of the
            # requests under test do not include the token's first lookup.
            verify_token(self.tokens[scope])
        return self.tokens[scope]

    def _auth(self, method, path, extra):
        if not self.with_tokens or "HTTP_AUTHORIZATION" in extra:
            return extra
        scope = "read" if method == "GET" else "route" if "placement" in path \
            else "proxy" if path.startswith("/v1/proxy/") else "instance"
        return {"HTTP_AUTHORIZATION": f"Bearer {self.token(scope)}", **extra}

    def post(self, path, body=None, raw=None, **extra):
        data = raw if raw is not None else json.dumps(body if body is not None else {})
        return self.client.post(path, data=data, content_type="application/json", **self._auth("POST", path, extra))

    def get(self, path, **params):
        extra = {key: params.pop(key) for key in [k for k in params if k.isupper()]}  # META, not query
        return self.client.get(path, data=params, **self._auth("GET", path, extra))


def pytest_generate_tests(metafunc):
    """A module marked ``both_entry_points`` runs each test that uses the client twice: Django, the hot lane."""
    if metafunc.definition.get_closest_marker("both_entry_points") and "client" in metafunc.fixturenames:
        metafunc.parametrize("entry_point", ["django", "lane"], indirect=True)


@pytest.fixture
def entry_point(request):
    """Which entry point the test client goes through: Django's handler, or the hot lane in front of it."""
    return getattr(request, "param", "django")


@pytest.fixture
def client(entry_point):
    """Django's test client; through the hot lane (``tests/hot_lane.py``) for the hot lane's run of a test."""
    from django.test import Client

    from tests.hot_lane import HotLaneClient

    return HotLaneClient() if entry_point == "lane" else Client()


@pytest.fixture
def api(client, request):
    api = JsonClient(client)
    if request.node.get_closest_marker("django_db"):
        # Issued before the test body, so no test counts their queries.
        for scope in ("read", "instance", "proxy", "route"):
            api.token(scope)
    return api


@pytest.fixture(autouse=True)
def fresh_process_state(settings):
    """Per-process state the server keeps between requests starts empty in every test:
    the verified-token cache, the rate limiter (on a cache of its own, not under var/), the route lane's gate
    (off), the placement
    boards, the tokenizers and the pool summary's columns (read afresh on every request here; ``tests/proxy/test_placement_board.py`` tests its refreshes)."""
    from django.core.cache import caches

    from controlplane.api import ratelimit
    from controlplane.api.auth import TOKEN_CACHE
    from proxy_app.placement.candidates import BOARD
    from proxy_app.pool.columns import LEDGER
    from proxy_app.prefix.keeper import PREFIX
    from proxy_app.tokenizers.registry import TOKENIZERS
    from scheduler_app.placement_api import BOARD as POOL_BOARD

    settings.CACHES = {**settings.CACHES, "ratelimit": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "fleetwatch-tests"}}
    caches["ratelimit"].clear()
    ratelimit.COUNTER = ratelimit.WindowCounter()
    TOKEN_CACHE.clear()
    settings.FLEETWATCH_PLACEMENT_REFRESH_S = 0
    settings.FLEETWATCH_TOKENIZER_REFRESH_S = 0  # tests/proxy/test_tokenizers_from_agents.py tests its refresh
    # The route lane's gate off: a test asks placement back to back, in process (tests/proxy/test_route_gate.py
    # turns it on).
    settings.FLEETWATCH_ROUTE_SHARE = 1
    BOARD.reset()
    PREFIX.reset()
    POOL_BOARD.reset()
    LEDGER.reset()
    TOKENIZERS.reset()
    yield


@pytest.fixture
def frozen():
    """Time stopped at T0; ``frozen.shift(seconds)`` moves it forward."""
    with time_machine.travel(T0, tick=False) as traveller:
        yield traveller

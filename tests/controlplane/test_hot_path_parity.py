"""The hot path's bypasses against DRF's own path: the same request, the same answer.

- ``HotWriteView`` (the snapshot report) against the same ``post`` as an
  action of a ``ControlPlaneViewSet`` (``parity_urls``): every error case of
  the DRF path (405, 401, 415, 400, 413, 403, 429) and the answers that are
  not errors give the same status, body and headers through the hot path.
- The page-only middleware (``controlplane.api.middleware``): every API
  answer is the same whether they step aside on the API lane or run as
  Django, WhiteNoise and django-htmx wrote them.

The bodies compiled by ``BodyChecks`` (``SNAPSHOT_BODY``, ``HEARTBEAT_BODY``) have their own twin tests
(``tests/proxy/test_snapshot_serializer_parity.py``, ``tests/proxy/test_heartbeat_body_parity.py``).
"""

import json

import pytest
from django.conf import settings as django_settings
from django.test import Client

from controlplane.api.tokens import ApiToken
from tests.factories import make_snapshot

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.controlplane.parity_urls")]

HOT = "/v1/instance/resource_snapshot"
DRF = "/twin/v1/instance/resource_snapshot"
# The headers an answer's meaning rides on besides its body (Allow aside: DRF's path also serves OPTIONS).
HEADERS = ("Content-Type", "WWW-Authenticate", "Retry-After")
VALID = {"instance_id": "i-1", "snapshot": make_snapshot(cpu=42.0), "metadata": {"report_seq": 1}}


def raw(value):
    return json.dumps(value)


# (case, method, body text, content type, which token)
CASES = [
    ("GET", "get", "", None, "instance"),
    ("PUT", "put", raw(VALID), "application/json", "instance"),
    ("PATCH", "patch", raw(VALID), "application/json", "instance"),
    ("DELETE", "delete", "", None, "instance"),
    ("GET without a token", "get", "", None, None),
    ("no token", "post", raw(VALID), "application/json", None),
    ("malformed header", "post", raw(VALID), "application/json", "malformed"),
    ("empty bearer", "post", raw(VALID), "application/json", "empty"),
    ("unknown token", "post", raw(VALID), "application/json", "unknown"),
    ("revoked token", "post", raw(VALID), "application/json", "revoked"),
    ("read token", "post", raw(VALID), "application/json", "read"),
    ("proxy token", "post", raw(VALID), "application/json", "proxy"),
    ("token bound to another instance", "post", raw(VALID), "application/json", "bound"),
    ("token bound to this instance", "post", raw(VALID), "application/json", "bound-here"),
    ("text body", "post", "instance_id=i-1", "text/plain", "instance"),
    ("form body", "post", "instance_id=i-1", "application/x-www-form-urlencoded", "instance"),
    ("no token and a text body", "post", "x", "text/plain", None),
    ("malformed JSON", "post", '{"instance_id": "i-1",', "application/json", "instance"),
    ("malformed JSON without a token", "post", '{"instance_id"', "application/json", None),
    ("NaN", "post", raw(VALID).replace("42.0", "NaN"), "application/json", "instance"),
    ("1e400", "post", raw(VALID).replace("42.0", "1e400"), "application/json", "instance"),
    ("NUL", "post", raw({**VALID, "snapshot": {"hostname": "gpu\u0000"}}), "application/json", "instance"),
    ("lone surrogate", "post", raw(VALID).replace('"gpu-host-1"', '"gpu\\udc00"'), "application/json", "instance"),
    ("too deep", "post", raw({**VALID, "snapshot": {"x": "__DEEP__"}}).replace('"__DEEP__"', "[" * 80 + "]" * 80),
     "application/json", "instance"),
    ("empty body", "post", "", "application/json", "instance"),
    ("null", "post", "null", "application/json", "instance"),
    ("array", "post", raw([VALID]), "application/json", "instance"),
    ("string", "post", raw("i-1"), "application/json", "instance"),
    ("no instance_id", "post", raw({"snapshot": {}}), "application/json", "instance"),
    ("null instance_id", "post", raw({**VALID, "instance_id": None}), "application/json", "instance"),
    ("number instance_id", "post", raw({**VALID, "instance_id": 7}), "application/json", "instance"),
    ("blank instance_id", "post", raw({**VALID, "instance_id": "  "}), "application/json", "instance"),
    ("long instance_id", "post", raw({**VALID, "instance_id": "i" * 256}), "application/json", "instance"),
    ("null snapshot", "post", raw({**VALID, "snapshot": None}), "application/json", "instance"),
    ("list snapshot", "post", raw({**VALID, "snapshot": [1]}), "application/json", "instance"),
    ("string metadata", "post", raw({**VALID, "metadata": "seq"}), "application/json", "instance"),
    ("stored", "post", raw(VALID), "application/json", "instance"),
    ("late", "post", raw({**VALID, "metadata": {"report_seq": 0}}), "application/json", "instance"),
    ("unknown instance", "post", raw({**VALID, "instance_id": "nobody"}), "application/json", "instance"),
]


@pytest.fixture
def tokens(frozen):
    issued = {scope: ApiToken.objects.issue(f"parity-{scope}", scope)[1] for scope in ("instance", "read", "proxy")}
    issued["bound"] = ApiToken.objects.issue("parity-bound", "instance", ["i-2"])[1]
    issued["bound-here"] = ApiToken.objects.issue("parity-bound-here", "instance", ["i-1"])[1]
    revoked = ApiToken.objects.issue("parity-revoked", "instance")[1]
    ApiToken.objects.revoke("parity-revoked")
    return {**issued, "revoked": revoked, "unknown": "fw_" + "x" * 43}


@pytest.fixture
def registered(api, frozen):
    response = api.post("/v1/instance/register", {"instance_id": "i-1", "host": "10.0.0.1", "port": 8000})
    assert response.status_code == 200, response.content


def authorization(tokens, which):
    if which is None:
        return {}
    if which == "malformed":
        return {"HTTP_AUTHORIZATION": f"Token {tokens['instance']}"}
    if which == "empty":
        return {"HTTP_AUTHORIZATION": "Bearer "}
    return {"HTTP_AUTHORIZATION": f"Bearer {tokens[which]}"}


def answer(response):
    """What a client reads of an answer: status, body, the headers that carry meaning."""
    try:
        body = response.json()
    except ValueError:
        body = response.content
    return response.status_code, body, {name: response.get(name) for name in HEADERS}


def send(path, method, body, content_type, extra, client=None):
    client = client or Client()
    kwargs = {"data": body, "content_type": content_type} if content_type else {}
    return getattr(client, method)(path, **kwargs, **extra)


@pytest.mark.parametrize("case, method, body, content_type, which", CASES, ids=[case[0] for case in CASES])
def test_the_hot_path_answers_as_drf_does(registered, tokens, case, method, body, content_type, which):
    extra = authorization(tokens, which)
    drf = answer(send(DRF, method, body, content_type, extra))
    hot = answer(send(HOT, method, body, content_type, extra))
    assert hot == drf
    assert hot[0] in {200, 400, 401, 403, 405, 415}, hot


def test_a_body_past_djangos_own_limit_is_the_same_413(registered, tokens, settings):
    # The middleware's declared-length check passes it; Django's own limit stops it inside the view.
    settings.FLEETWATCH_MAX_BODY_BYTES = 10 * 1024 * 1024
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    body = raw({**VALID, "snapshot": {"padding": "x" * 4096}})
    extra = authorization(tokens, "instance")
    drf, hot = (answer(send(path, "post", body, "application/json", extra)) for path in (DRF, HOT))
    assert hot == drf and hot[0] == 413


def test_a_body_past_the_declared_limit_is_the_same_413(registered, tokens, settings):
    settings.FLEETWATCH_MAX_BODY_BYTES = 1024
    body = raw({**VALID, "snapshot": {"padding": "x" * 4096}})
    extra = authorization(tokens, "instance")
    drf, hot = (answer(send(path, "post", body, "application/json", extra)) for path in (DRF, HOT))
    assert hot == drf and hot[0] == 413


def test_the_rate_limit_answers_the_same_429(registered, tokens, settings):
    from controlplane.api import ratelimit

    settings.FLEETWATCH_RATE_LIMIT = 2
    extra = authorization(tokens, "instance")
    answers = {}
    for path in (DRF, HOT):
        ratelimit.COUNTER = ratelimit.WindowCounter()
        answers[path] = [answer(send(path, "post", raw(VALID), "application/json", extra)) for _ in range(3)]
    assert answers[HOT] == answers[DRF]
    assert [status for status, _, _ in answers[HOT]] == [200, 200, 429]


@pytest.mark.parametrize("auth, trusted, which", [(False, [], None), (True, ["127.0.0.0/8"], None)])
def test_no_token_is_asked_alike_with_auth_off_or_from_a_trusted_network(registered, tokens, settings, auth,
                                                                          trusted, which):
    settings.FLEETWATCH_AUTH = auth
    settings.FLEETWATCH_TRUSTED_NETWORKS = trusted
    drf, hot = (answer(send(path, "post", raw(VALID), "application/json", {})) for path in (DRF, HOT))
    assert hot == drf == (200, {"ok": True}, {"Content-Type": "application/json", "WWW-Authenticate": None,
                                              "Retry-After": None})


# --- the page-only middleware ---------------------------------------------------------------

PAGES_MIDDLEWARE = {
    "controlplane.api.middleware.WhiteNoiseMiddleware": "whitenoise.middleware.WhiteNoiseMiddleware",
    "controlplane.api.middleware.AuthenticationMiddleware": "django.contrib.auth.middleware.AuthenticationMiddleware",
    "controlplane.api.middleware.MessageMiddleware": "django.contrib.messages.middleware.MessageMiddleware",
    "controlplane.api.middleware.HtmxMiddleware": "django_htmx.middleware.HtmxMiddleware",
}
API_CALLS = [
    ("get", "/healthz", "", None, None),
    ("get", "/v1/instance/list", "", None, "read"),
    ("get", "/v1/instance/list?limit=1&offset=0", "", None, "read"),
    ("get", "/v1/instance/list?limit=0", "", None, "read"),
    ("get", "/v1/instance/list", "", None, None),
    ("get", "/v1/instance/history?instance_id=i-1&range=15m", "", None, "read"),
    ("get", "/debug/pool_resource_sources", "", None, "read"),
    ("get", "/v1/proxy/list", "", None, "unknown"),
    ("post", "/v1/instance/heartbeat", raw({"instance_id": "i-1", "inflight": 3}), "application/json", "instance"),
    ("post", "/v1/instance/heartbeat", raw({"instance_id": "i-1", "inflight": -3}), "application/json", "instance"),
    ("post", "/v1/instance/heartbeat", raw({"instance_id": "i-1"}), "application/json", "read"),
    ("post", HOT, raw(VALID), "application/json", "instance"),
    ("post", HOT, "{", "application/json", "instance"),
    ("post", "/v1/proxy/register", raw({"proxy_id": "p", "host": "h", "port": 1}), "application/json", "instance"),
    ("delete", "/v1/instance/register", "", None, "instance"),
    ("get", "/v1/nowhere", "", None, "read"),
]


@pytest.mark.parametrize("method, path, body, content_type, which", API_CALLS)
def test_the_api_lane_answers_as_the_full_middleware_does(registered, tokens, settings, method, path, body,
                                                          content_type, which):
    extra = authorization(tokens, which)
    on_the_lane = send(path, method, body, content_type, extra)
    assert not hasattr(on_the_lane.wsgi_request, "_messages")  # the page-only middleware stepped aside
    settings.MIDDLEWARE = [PAGES_MIDDLEWARE.get(name, name) for name in django_settings.MIDDLEWARE]
    through_all = send(path, method, body, content_type, extra)
    assert hasattr(through_all.wsgi_request, "_messages")  # Django's own ran
    assert answer(on_the_lane) == answer(through_all)

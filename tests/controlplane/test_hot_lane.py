"""The hot lane (``controlplane.ops.hot_lane``) answers as Django does: status, body, every header, metrics, logs.

Each request goes once through Django's test client and once through the
hot lane over WSGI (``tests.hot_lane.HotLaneClient``), on the app's own
URLconf; the endpoints' own tests run through both as well (the modules
marked ``both_entry_points``).
"""

import json
import logging

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.handlers.wsgi import WSGIHandler
from django.db import OperationalError, close_old_connections, connection, reset_queries
from django.test import Client

from controlplane.api import ratelimit
from controlplane.ops.hot_lane import STANDS_FOR, STEPS_ASIDE, HotLane
from controlplane.ops.metrics import REQUESTS
from controlplane.ops.unread_body import ClosingUnreadBodies
from tests.controlplane.test_hot_path_parity import CASES, VALID, authorization, raw, tokens  # noqa: F401 - a fixture
from tests.hot_lane import HotLaneClient

pytestmark = pytest.mark.django_db

SNAPSHOT = "/v1/instance/resource_snapshot"
HEARTBEAT = "/v1/instance/heartbeat"
HEARTBEATS = [
    ("beat", {"instance_id": "i-1", "inflight": 3}),
    ("unknown instance", {"instance_id": "nobody"}),
    ("bad load", {"instance_id": "i-1", "inflight": -3}),
    ("fingerprint mismatch", {"instance_id": "i-1", "capability_fingerprint": "sha256:" + "b" * 64}),
    ("no instance_id", {"inflight": 1}),
]


@pytest.fixture
def registered(frozen):
    response = Client().post("/v1/instance/register", {"instance_id": "i-1", "host": "10.0.0.1", "port": 8000},
                             content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {_instance_token()}")
    assert response.status_code == 200, response.content


def _instance_token():
    from controlplane.api.tokens import ApiToken

    return ApiToken.objects.issue("lane-register", "instance")[1]


def whole(response):
    """Everything a client reads: status, body and every header."""
    return response.status_code, response.content, sorted(response.items())


def both(method, path, body, content_type, extra):
    """The answer through Django and through the hot lane, and whether the hot lane itself answered."""
    kwargs = {"data": body, "content_type": content_type} if content_type else {}
    django = getattr(Client(raise_request_exception=False), method)(path, **kwargs, **extra)
    lane = HotLaneClient()
    ratelimit.COUNTER = ratelimit.WindowCounter()
    through_lane = getattr(lane, method)(path, **kwargs, **extra)
    ratelimit.COUNTER = ratelimit.WindowCounter()
    return whole(django), whole(through_lane), lane.lane_answers


@pytest.mark.parametrize("case, method, body, content_type, which", CASES, ids=[case[0] for case in CASES])
def test_it_answers_every_snapshot_case_as_django(registered, tokens, case, method, body, content_type, which):
    django, lane, answered = both(method, SNAPSHOT, body, content_type, authorization(tokens, which))
    assert lane == django
    # A form body goes to Django (the NUL guard reads forms); everything else the hot lane answers itself.
    assert answered == (0 if content_type == "application/x-www-form-urlencoded" else 1)


@pytest.mark.parametrize("case, body", HEARTBEATS, ids=[case for case, _ in HEARTBEATS])
def test_it_answers_heartbeats_as_django(registered, tokens, case, body):
    django, lane, answered = both("post", HEARTBEAT, raw(body), "application/json", authorization(tokens, "instance"))
    assert lane == django and answered == 1


@pytest.mark.parametrize("extra, query", [
    ({"HTTP_COOKIE": "sessionid=abc"}, ""), ({}, "?x=%00"), ({}, "?anything=1"),
])
def test_it_hands_django_what_the_middleware_it_skips_could_act_on(registered, tokens, extra, query):
    django, lane, answered = both("post", SNAPSHOT + query, raw(VALID), "application/json",
                                  {**authorization(tokens, "instance"), **extra})
    assert lane == django and answered == 0


def test_it_hands_django_every_other_path(registered, tokens):
    django, lane, answered = both("get", "/v1/instance/list", "", None, authorization(tokens, "read"))
    assert lane == django and lane[0] == 200 and answered == 0


@pytest.mark.parametrize("limit, declared", [(1024, True), (10 * 1024 * 1024, False)])
def test_a_body_too_large_is_the_same_413_with_connection_close(registered, tokens, settings, limit, declared):
    settings.FLEETWATCH_MAX_BODY_BYTES = limit
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    body = raw({**VALID, "snapshot": {"padding": "x" * 4096}})
    django, lane, answered = both("post", SNAPSHOT, body, "application/json", authorization(tokens, "instance"))
    assert lane == django and lane[0] == 413 and ("Connection", "close") in lane[2] and answered == 1


def test_the_rate_limit_is_the_same_429(registered, tokens, settings):
    settings.FLEETWATCH_RATE_LIMIT = 2
    extra = authorization(tokens, "instance")
    answers = {}
    for name, client in (("django", Client()), ("lane", HotLaneClient())):
        ratelimit.COUNTER = ratelimit.WindowCounter()
        answers[name] = [whole(client.post(SNAPSHOT, raw(VALID), content_type="application/json", **extra))
                         for _ in range(3)]
    assert answers["lane"] == answers["django"]
    assert [status for status, _, _ in answers["lane"]] == [200, 200, 429]


def test_a_database_outage_is_the_same_503(registered, tokens):
    def unavailable(execute, sql, params, many, context):
        raise OperationalError("connection refused")

    extra = authorization(tokens, "instance")
    with connection.execute_wrapper(unavailable):
        django, lane, answered = both("post", SNAPSHOT, raw(VALID), "application/json", extra)
    assert lane == django and answered == 1
    assert lane[0] == 503 and json.loads(lane[1]) == {"ok": False, "error": "database_unavailable"}


def test_it_counts_and_logs_its_answers_as_django(registered, tokens, caplog):
    extra = authorization(tokens, "instance")

    def counted(status):
        return REQUESTS.labels("instance-resource-snapshot", "POST", status)._value.get()

    before = counted("200"), counted("400")
    with caplog.at_level(logging.WARNING, logger="django.request"):
        for client in (Client(), HotLaneClient()):
            client.post(SNAPSHOT, raw(VALID), content_type="application/json", **extra)
            client.post(SNAPSHOT, "{", content_type="application/json", **extra)
    assert (counted("200") - before[0], counted("400") - before[1]) == (2, 2)
    lines = [record.getMessage() for record in caplog.records if record.name == "django.request"]
    assert lines == ["Bad Request: /v1/instance/resource_snapshot"] * 2


def test_what_up_serves_is_the_hot_lane_over_both_hot_writes():
    from controlplane import wsgi
    from controlplane.ops.up import web_server_argv

    assert "controlplane.wsgi:application" in web_server_argv("127.0.0.1", 8000, 2)
    assert isinstance(wsgi.application, ClosingUnreadBodies) and wsgi.application.app.__wrapped__ is wsgi.lane
    assert isinstance(wsgi.lane, HotLane)
    assert {SNAPSHOT, HEARTBEAT, "/v1/instance/unregister"} <= set(wsgi.lane.routes)
    assert {route.name for route in wsgi.lane.routes.values()} >= {
        "instance-resource-snapshot", "instance-heartbeat", "instance-unregister"}


def test_it_knows_what_every_middleware_would_do_and_refuses_one_it_does_not(settings):
    assert set(settings.MIDDLEWARE) == STANDS_FOR | STEPS_ASIDE
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "django.middleware.gzip.GZipMiddleware"]
    with pytest.raises(ImproperlyConfigured, match="GZipMiddleware"):
        HotLane(WSGIHandler())


def test_it_runs_what_the_request_signals_run_without_sending_them():
    lane = HotLane(WSGIHandler())
    assert {reset_queries, close_old_connections} <= set(lane.on_started())
    assert close_old_connections in lane.on_finished()


def test_a_disallowed_host_is_the_same_400_and_log_line(registered, tokens, caplog):
    extra = {**authorization(tokens, "instance"), "HTTP_HOST": "evil.example"}
    with caplog.at_level(logging.WARNING):
        django, lane, answered = both("post", SNAPSHOT, raw(VALID), "application/json", extra)
    assert lane == django and lane[0] == 400 and answered == 1
    assert "Host" in json.loads(lane[1])["detail"]
    lines = [(record.name, record.levelname) for record in caplog.records if record.name.startswith("django.")]
    assert lines == [("django.security.DisallowedHost", "WARNING")] * 2


def test_the_security_headers_over_https_are_djangos(registered, tokens, settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_HSTS_SECONDS, settings.SECURE_HSTS_PRELOAD = 3600, True
    settings.SECURE_SSL_REDIRECT, settings.SECURE_REDIRECT_EXEMPT = True, [r"^v1/"]
    for proto in ("https", "http"):
        extra = {**authorization(tokens, "instance"), "HTTP_X_FORWARDED_PROTO": proto}
        django, lane, answered = both("post", SNAPSHOT, raw(VALID), "application/json", extra)
        assert lane == django and lane[0] == 200 and answered == 1
        assert ("Strict-Transport-Security" in dict(lane[2])) == (proto == "https")


def test_an_answer_before_the_url_is_resolved_is_counted_unmatched(registered, tokens, settings):
    settings.FLEETWATCH_MAX_BODY_BYTES = 64
    before = REQUESTS.labels("unmatched", "POST", "413")._value.get()
    for client in (Client(), HotLaneClient()):
        response = client.post(SNAPSHOT, raw(VALID), content_type="application/json", **authorization(tokens, "instance"))
        assert response.status_code == 413
    assert REQUESTS.labels("unmatched", "POST", "413")._value.get() - before == 2


def test_an_unexpected_error_is_the_same_500_logged_once(registered, tokens, caplog, monkeypatch):
    from proxy_app.api import reports

    def broken(*args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(reports, "ingest_snapshot", broken)
    with caplog.at_level(logging.ERROR, logger="django.request"):
        django, lane, answered = both("post", SNAPSHOT, raw(VALID), "application/json",
                                      authorization(tokens, "instance"))
    assert lane == django and lane[0] == 500 and answered == 1
    lines = [record.getMessage() for record in caplog.records if record.name == "django.request"]
    assert lines == ["Internal Server Error: /v1/instance/resource_snapshot"] * 2


@pytest.mark.parametrize("case, body", [
    ("known", {"instance_id": "i-1"}), ("unknown", {"instance_id": "nobody"}), ("no id", {}),
])
def test_it_answers_unregisters_as_django(registered, tokens, case, body):
    django, lane, answered = both("post", "/v1/instance/unregister", raw(body), "application/json",
                                  authorization(tokens, "instance"))
    if case == "known":  # the first unregister took it: the lane's is of an unknown id
        assert json.loads(django[1]) == {"ok": True} and json.loads(lane[1]) == {"ok": False}
        assert [h for h in django[2] if h[0] != "Content-Length"] == [h for h in lane[2] if h[0] != "Content-Length"]
    else:
        assert lane == django
    assert answered == 1

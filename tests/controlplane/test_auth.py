"""Tokens and access (SPEC 10): every endpoint against every kind of caller.

Each case asserts the status, the exact envelope, and that a refused
request wrote nothing.
"""

import pytest
from django.contrib.auth.models import User

from controlplane.api.tokens import ApiToken
from proxy_app.models import Instance, InstanceResource, InstanceStatusChange
from scheduler_app.models import PoolResourceSample, Proxy, ProxyStatusChange
from tests.factories import make_pool_resource, make_snapshot

pytestmark = [pytest.mark.django_db, pytest.mark.both_entry_points]

INSTANCE_WRITES = {
    "/v1/instance/register": {"instance_id": "i-1", "host": "10.0.0.1", "port": 8000},
    "/v1/instance/heartbeat": {"instance_id": "i-1", "inflight": 2},
    "/v1/instance/resource_snapshot": {"instance_id": "i-1", "snapshot": make_snapshot(cpu=77.0)},
    "/v1/instance/unregister": {"instance_id": "i-1"},
}
PROXY_WRITES = {
    "/v1/proxy/register": {"proxy_id": "pxy-a", "host": "10.0.0.1", "port": 8002,
                           "pool_resource": make_pool_resource()},
    "/v1/proxy/heartbeat": {"proxy_id": "pxy-a", "inflight": 3, "pool_resource": make_pool_resource(cpu=99.0)},
    "/v1/proxy/unregister": {"proxy_id": "pxy-a"},
}
READS = [
    ("/v1/instance/list", {}), ("/v1/instance/history", {"instance_id": "i-1", "range": "1h"}),
    ("/debug/status", {}), ("/debug/instance_resources", {}), ("/debug/instance_loads", {}),
    ("/debug/pool_resource", {}), ("/debug/pool_resource/history", {"range": "15m"}),
    ("/debug/pool_resource_sources", {}), ("/v1/proxy/list", {}),
    ("/v1/proxy/history", {"proxy_id": "pxy-a", "range": "1h"}), ("/debug/proxy_pool_resources", {}),
]
UNAUTHORIZED = {"ok": False, "error": "unauthorized"}
FORBIDDEN = {"ok": False, "error": "forbidden"}


@pytest.fixture
def known(api, frozen):
    """i-1 and pxy-a exist (registered with the test client's own tokens)."""
    assert api.post("/v1/instance/register", INSTANCE_WRITES["/v1/instance/register"]).status_code == 200
    assert api.post("/v1/proxy/register", PROXY_WRITES["/v1/proxy/register"]).status_code == 200


def state():
    return (
        list(Instance.objects.values()), list(InstanceResource.objects.values()),
        InstanceStatusChange.objects.count(), list(Proxy.objects.values()), PoolResourceSample.objects.count(),
        ProxyStatusChange.objects.count(),
    )


def bearer(secret):
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


def issue(scope, name=None, instance_ids=()):
    return ApiToken.objects.issue(name or f"caller-{scope}", scope, instance_ids)[1]


ALL_WRITES = [(path, body) for path, body in {**INSTANCE_WRITES, **PROXY_WRITES}.items()]


@pytest.mark.parametrize("path, body", ALL_WRITES)
@pytest.mark.parametrize("header", [None, "Bearer fw_not-a-real-token", "Bearer ", "Token abc", "Bearer nonsense"])
def test_it_refuses_a_write_without_a_valid_token_with_401(api, known, path, body, header):
    before = state()
    extra = {} if header is None else {"HTTP_AUTHORIZATION": header}
    response = api.as_anonymous().post(path, body, **extra)
    assert response.status_code == 401
    assert response.json() == UNAUTHORIZED
    assert response["WWW-Authenticate"] == "Bearer"
    assert state() == before


@pytest.mark.parametrize("path, params", READS)
def test_it_refuses_a_read_without_a_token_with_401(api, known, path, params):
    response = api.as_anonymous().get(path, **params)
    assert (response.status_code, response.json()) == (401, UNAUTHORIZED)
    assert response["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize("path, body", ALL_WRITES)
def test_it_refuses_a_revoked_token_with_401(api, known, path, body):
    scope = "proxy" if path.startswith("/v1/proxy/") else "instance"
    secret = issue(scope)
    ApiToken.objects.revoke(f"caller-{scope}")
    before = state()
    response = api.post(path, body, **bearer(secret))
    assert (response.status_code, response.json()) == (401, UNAUTHORIZED)
    assert state() == before


@pytest.mark.parametrize("scope, path, body", [
    *(("read", path, body) for path, body in ALL_WRITES),
    *(("proxy", path, body) for path, body in INSTANCE_WRITES.items()),
    *(("instance", path, body) for path, body in PROXY_WRITES.items()),
])
def test_it_refuses_a_token_of_the_wrong_scope_with_403(api, known, scope, path, body):
    before = state()
    response = api.post(path, body, **bearer(issue(scope)))
    needed = "proxy" if path.startswith("/v1/proxy/") else "instance"
    # The 403 names the scope it needed, and the token's own.
    assert (response.status_code, response.json()) == (403, {
        **FORBIDDEN, "detail": {"scope": [f"Needs a token of scope {needed}; this one's scope is {scope}."]}})
    assert state() == before


@pytest.mark.parametrize("scope, path, body", [
    *(("instance", path, body) for path, body in INSTANCE_WRITES.items()),
    *(("proxy", path, body) for path, body in PROXY_WRITES.items()),
])
def test_it_accepts_a_token_of_the_right_scope(api, known, scope, path, body):
    response = api.post(path, body, **bearer(issue(scope)))
    assert response.status_code == 200
    answer = response.json()
    assert answer.get("ok") is True or answer.get("instance_id") == "i-1" or answer.get("proxy_id") == "pxy-a"


@pytest.mark.parametrize("scope", ["read", "instance", "proxy"])
@pytest.mark.parametrize("path, params", READS)
def test_it_lets_any_valid_token_read(api, known, scope, path, params):
    assert api.get(path, **params, **bearer(issue(scope))).status_code == 200


@pytest.mark.parametrize("path, body", INSTANCE_WRITES.items())
def test_it_lets_a_bound_token_speak_for_its_own_instance_only(api, known, path, body):
    mine = issue("instance", "mine", ["i-1", "i-9"])
    theirs = issue("instance", "theirs", ["i-2"])
    before = state()
    refused = api.post(path, body, **bearer(theirs))
    assert (refused.status_code, refused.json()) == (403, {
        **FORBIDDEN, "detail": {"instance_id": ["This token is bound to other instance ids."]}})
    assert state() == before
    assert api.post(path, body, **bearer(mine)).status_code == 200


def test_it_binds_a_register_without_an_id_to_the_name_the_proxy_gives_it(api, frozen):
    bound = issue("instance", "bound", ["hp_10.0.0.7:9000"])
    ok = api.post("/v1/instance/register", {"host": "10.0.0.7", "port": 9000}, **bearer(bound))
    assert ok.json()["instance_id"] == "hp_10.0.0.7:9000"
    other = api.post("/v1/instance/register", {"host": "10.0.0.8", "port": 9000}, **bearer(bound))
    assert other.status_code == 403


@pytest.mark.parametrize("path, body", ALL_WRITES)
def test_it_checks_nothing_with_auth_off(api, known, settings, path, body):
    settings.FLEETWATCH_AUTH = False
    assert api.as_anonymous().post(path, body).status_code == 200


@pytest.mark.parametrize("path, params", READS)
def test_it_opens_reads_with_auth_off(api, known, settings, path, params):
    settings.FLEETWATCH_AUTH = False
    assert api.as_anonymous().get(path, **params).status_code == 200


@pytest.mark.parametrize("path, params", READS)
def test_it_lets_a_staff_session_read_but_not_a_plain_user(api, known, client, path, params):
    user = User.objects.create_user("viewer", password="pw")
    client.force_login(user)
    response = api.as_anonymous().get(path, **params)
    assert (response.status_code, response.json()) == (403, {
        **FORBIDDEN, "detail": {"session": ["Reads need a valid token or the session of a staff user."]}})
    user.is_staff = True
    user.save()
    assert api.as_anonymous().get(path, **params).status_code == 200


@pytest.mark.parametrize("path, body", ALL_WRITES)
def test_it_lets_no_session_write(api, known, admin_client, path, body):
    before = state()
    response = admin_client.post(path, body, content_type="application/json")
    assert response.status_code in (401, 403)
    assert state() == before


def test_it_leaves_healthz_open(api):
    assert api.as_anonymous().get("/healthz").status_code == 200


@pytest.mark.parametrize("remote, expected", [("10.1.2.3", 200), ("10.9.0.1", 401)])
def test_it_lets_a_trusted_network_in_without_a_token(api, frozen, settings, remote, expected):
    settings.FLEETWATCH_TRUSTED_NETWORKS = ["10.1.0.0/16", "192.168.0.0/24"]
    body = INSTANCE_WRITES["/v1/instance/register"]
    assert api.as_anonymous().post("/v1/instance/register", body, REMOTE_ADDR=remote).status_code == expected
    assert api.as_anonymous().get("/v1/instance/list", REMOTE_ADDR=remote).status_code == expected


def test_it_still_checks_a_token_sent_from_a_trusted_network(api, frozen, settings):
    settings.FLEETWATCH_TRUSTED_NETWORKS = ["127.0.0.0/8"]
    response = api.post("/v1/instance/register", INSTANCE_WRITES["/v1/instance/register"],
                        HTTP_AUTHORIZATION="Bearer fw_wrong")
    assert response.status_code == 401

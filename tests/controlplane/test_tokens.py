"""Tokens at rest and in use: hashed, cached a few seconds, last use written once a minute."""

import io
import re

import pytest
from django.core.management import CommandError, call_command

from controlplane.api.auth import verify_token
from controlplane.api.tokens import CACHE_TTL_S, ApiToken, TokenCache, digest
from tests.factories import T0

pytestmark = pytest.mark.django_db


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def cache_with(clock):
    return TokenCache(monotonic=clock)


def verify(cache, secret):
    return cache.verify(secret, ApiToken.objects.grant_for, ApiToken.objects.mark_used)


def test_it_stores_only_the_hash_of_a_token(frozen):
    token, secret = ApiToken.objects.issue("agent-7", "instance", ["i-7"])
    stored = ApiToken.objects.values().get(pk=token.pk)
    assert secret.startswith("fw_") and len(secret) == 46
    assert stored["digest"] == digest(secret)
    assert secret not in str(stored)
    assert stored["hint"] == secret[:7]
    assert (stored["scope"], stored["instance_ids"], stored["created_at"]) == ("instance", ["i-7"], T0)


def test_it_refuses_a_revoked_token_within_the_cache_lifetime(frozen):
    clock = Clock()
    cache = cache_with(clock)
    _, secret = ApiToken.objects.issue("agent", "instance")
    assert verify(cache, secret).name == "agent"
    ApiToken.objects.revoke("agent")
    clock.now += CACHE_TTL_S - 0.1
    assert verify(cache, secret) is not None  # still remembered: no database round trip
    clock.now += 0.2
    assert verify(cache, secret) is None


def test_it_reads_the_database_once_per_cache_lifetime(frozen, django_assert_num_queries):
    clock = Clock()
    cache = cache_with(clock)
    _, secret = ApiToken.objects.issue("agent", "instance")
    with django_assert_num_queries(2):  # the lookup, and the first use recorded
        verify(cache, secret)
    with django_assert_num_queries(0):
        for _ in range(100):
            verify(cache, secret)


def test_it_remembers_an_unknown_token_too(frozen, django_assert_num_queries):
    cache = cache_with(Clock())
    with django_assert_num_queries(1):
        for _ in range(5):
            assert verify(cache, "fw_made-up") is None


def test_it_refuses_anything_that_is_not_a_token_without_a_query(django_assert_num_queries):
    with django_assert_num_queries(0):
        assert verify(cache_with(Clock()), "not-a-fleetwatch-token") is None


def test_it_records_the_last_use_at_most_once_a_minute(frozen):
    clock = Clock()
    cache = cache_with(clock)
    _, secret = ApiToken.objects.issue("agent", "instance")
    verify(cache, secret)
    assert ApiToken.objects.get().last_used_at == T0
    frozen.shift(30)
    clock.now += 30
    verify(cache, secret)
    assert ApiToken.objects.get().last_used_at == T0
    frozen.shift(31)
    clock.now += 31
    verify(cache, secret)
    assert ApiToken.objects.get().last_used_at == T0 + 61


def test_it_frees_a_revoked_name_for_a_new_token(frozen):
    ApiToken.objects.issue("agent", "instance")
    ApiToken.objects.revoke("agent")
    _, secret = ApiToken.objects.issue("agent", "instance")
    assert verify_token(secret).name == "agent"
    assert ApiToken.objects.filter(name="agent").count() == 2


# --- commands (SPEC 10's exact interface) ---------------------------------------------


def run(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_prints_a_new_token_alone_on_the_last_line(frozen):
    out, _ = run("create_token", "--scope", "instance", "--name", "gpu-host-7", "--instance-id", "i-7",
                 "--instance-id", "i-8")
    secret = out.splitlines()[-1]
    assert out.strip() == secret
    grant = verify_token(secret)
    assert (grant.name, grant.scope, grant.instance_ids) == ("gpu-host-7", "instance", frozenset({"i-7", "i-8"}))


def test_it_creates_a_route_token_for_routers(frozen):
    secret = run("create_token", "--scope", "route", "--name", "gateway-1")[0].splitlines()[-1]
    assert (verify_token(secret).scope, ApiToken.objects.get().get_scope_display()) == (
        "route", "route (routers asking for placement and reporting outcomes)")


def test_it_refuses_a_second_live_token_of_the_same_name(frozen):
    run("create_token", "--scope", "read", "--name", "grafana")
    with pytest.raises(CommandError, match="already"):
        run("create_token", "--scope", "read", "--name", "grafana")


def test_it_binds_only_instance_tokens(frozen):
    with pytest.raises(CommandError, match="instance tokens only"):
        run("create_token", "--scope", "proxy", "--name", "p", "--instance-id", "i-1")


def test_it_revokes_by_name_and_says_when_there_is_none(frozen):
    out, _ = run("create_token", "--scope", "read", "--name", "grafana")
    assert run("revoke_token", "grafana")[0].strip() == "revoked grafana"
    assert ApiToken.objects.get().revoked
    with pytest.raises(CommandError, match="no live token"):
        run("revoke_token", "grafana")


def test_it_lists_tokens_without_showing_them(frozen):
    secret = run("create_token", "--scope", "instance", "--name", "agent-1", "--instance-id", "i-1")[0].strip()
    run("create_token", "--scope", "read", "--name", "grafana")
    run("revoke_token", "grafana")
    listing = run("list_tokens")[0]
    assert secret not in listing
    lines = listing.splitlines()
    assert lines[0].split()[:2] == ["NAME", "SCOPE"]
    assert "agent-1" in lines[1] and "instance" in lines[1] and "i-1" in lines[1] and lines[1].endswith("no")
    assert "grafana" in lines[2] and "2026-01-01 00:00:00 UTC" in lines[2]


# --- admin ------------------------------------------------------------------------------------


def test_it_shows_a_new_token_once_in_the_admin(admin_client, frozen):
    response = admin_client.post("/admin/controlplane/apitoken/add/",
                                 {"name": "dash", "scope": "read", "instance_ids_text": ""}, follow=True)
    page = response.content.decode()
    token = ApiToken.objects.get(name="dash")
    shown = re.findall(r"fw_[A-Za-z0-9_-]{43}", page)
    assert len(shown) == 1 and digest(shown[0]) == token.digest
    listing = admin_client.get("/admin/controlplane/apitoken/").content.decode()
    assert shown[0] not in listing and token.hint in listing


def test_it_revokes_from_the_admin_and_never_deletes(admin_client, frozen):
    token, _ = ApiToken.objects.issue("dash", "read")
    admin_client.post("/admin/controlplane/apitoken/", {"action": "revoke", "_selected_action": [token.pk]})
    assert ApiToken.objects.get().revoked
    assert admin_client.get(f"/admin/controlplane/apitoken/{token.pk}/delete/").status_code == 403

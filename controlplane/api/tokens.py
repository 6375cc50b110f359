"""API tokens (SPEC 10): what a bearer token is, how one is checked cheaply, and how it is stored.

A token is ``fw_`` + 43 URL-safe characters (256 random bits). Only its
SHA-256 is stored: a token that random cannot be guessed from its hash, so a
slow password hash would only slow every request down.

``verify`` runs on every authenticated request, the snapshot hot path
included, so verified tokens are kept in this process for ``CACHE_TTL_S``
seconds: a revocation takes effect within that long in every web process,
and a snapshot costs no database round trip for its token. Last use is
written at most once a minute per token and process. ``ApiToken`` is the
stored token: its digest, name, scope and the instance ids it may speak for.
"""

import hashlib
import secrets
import threading
import time
from dataclasses import dataclass

from django.db import models

from controlplane import clock
from controlplane.endpoints.models import NAME_LENGTH

PREFIX = "fw_"
CACHE_TTL_S = 5.0
LAST_USE_EVERY_S = 60.0


class Scope(models.TextChoices):
    INSTANCE = "instance", "instance (agents)"
    PROXY = "proxy", "proxy (proxies reporting to a scheduler)"
    READ = "read", "read (dashboards and scrapers)"
    ROUTE = "route", "route (routers asking for placement and reporting outcomes)"


def new_secret():
    return PREFIX + secrets.token_urlsafe(32)


def digest(secret):
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Grant:
    """What a verified token allows: its scope and, for an instance token, the ids it may speak for."""

    token_id: int
    name: str
    scope: str
    instance_ids: frozenset  # empty: any instance

    def allows_instance(self, instance_id):
        return not self.instance_ids or instance_id in self.instance_ids


class TokenCache:
    """Verified (and unknown) token digests, remembered for ``ttl_s`` seconds in this process."""

    def __init__(self, ttl_s=CACHE_TTL_S, monotonic=time.monotonic):
        self.ttl_s = ttl_s
        self._monotonic = monotonic
        self._entries = {}
        self._last_use_written = {}
        self._lock = threading.Lock()

    def verify(self, secret, lookup, mark_used):
        """The Grant of ``secret``, or None. ``lookup(digest)`` reads the database on a miss;
        ``mark_used(token_id, now)`` records a use, at most once a minute per token."""
        if not secret.startswith(PREFIX):
            return None
        key = digest(secret)
        now = self._monotonic()
        with self._lock:
            entry = self._entries.get(key)
        if entry is None or entry[0] <= now:
            grant = lookup(key)
            with self._lock:
                if len(self._entries) > 10_000:  # a flood of made-up tokens must not grow memory
                    self._entries.clear()
                self._entries[key] = (now + self.ttl_s, grant)
        else:
            grant = entry[1]
        if grant is not None:
            with self._lock:
                due = self._last_use_written.get(grant.token_id, -LAST_USE_EVERY_S) + LAST_USE_EVERY_S <= now
                if due:
                    self._last_use_written[grant.token_id] = now
            if due:
                mark_used(grant.token_id, clock.now())
        return grant

    def clear(self):
        with self._lock:
            self._entries.clear()
            self._last_use_written.clear()


# --- the stored tokens ----------------------------------------------------------------


class ApiTokenManager(models.Manager):
    def issue(self, name, scope, instance_ids=(), now=None):
        """Create a token; returns ``(token, secret)``. The secret is shown once and never stored."""
        secret = new_secret()
        token = self.create(
            name=name, scope=scope, digest=digest(secret), hint=secret[:len(PREFIX) + 4],
            instance_ids=sorted(set(instance_ids)), created_at=clock.now() if now is None else now,
        )
        return token, secret

    def revoke(self, name, now=None):
        """Revoke the live token called ``name``; False when there is none."""
        return bool(self.filter(name=name, revoked_at=None).update(revoked_at=clock.now() if now is None else now))

    def grant_for(self, digest):
        """The Grant of a live token with this digest, or None (one indexed read)."""
        row = (self.filter(digest=digest, revoked_at=None)
               .values_list("pk", "name", "scope", "instance_ids").first())
        if row is None:
            return None
        pk, name, scope, instance_ids = row
        return Grant(pk, name, scope, frozenset(instance_ids or ()))

    def mark_used(self, token_id, now):
        self.filter(pk=token_id).update(last_used_at=now)


class ApiToken(models.Model):
    """A bearer token: stored as its SHA-256 only, named, scoped, revocable (SPEC 10)."""

    name = models.CharField(max_length=NAME_LENGTH)
    scope = models.CharField(max_length=16, choices=Scope.choices)
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the token, hex.")
    hint = models.CharField(max_length=16, help_text="The token's first characters, to recognise it by.")
    # An instance token may be bound to these ids only; empty: any instance.
    instance_ids = models.JSONField(default=list, blank=True)
    created_at = models.FloatField(help_text="Epoch seconds.")
    last_used_at = models.FloatField(null=True, blank=True, help_text="Epoch seconds; written at most once a minute.")
    revoked_at = models.FloatField(null=True, blank=True, help_text="Epoch seconds.")

    objects = ApiTokenManager()

    class Meta:
        ordering = ["name", "-created_at"]
        verbose_name = "API token"
        constraints = [
            # A name means one live token; a revoked one leaves its name free for the next.
            models.UniqueConstraint(fields=["name"], condition=models.Q(revoked_at=None), name="api_token_live_name"),
        ]

    def __str__(self):
        return self.name

    @property
    def revoked(self):
        return self.revoked_at is not None

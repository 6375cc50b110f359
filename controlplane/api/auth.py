"""Who may call the API (SPEC 10): one authentication class, one permission per kind of call.

Steps, in the order a request meets them (all on ``ControlPlaneViewSet``):

1. ``BearerTokenAuthentication`` reads ``Authorization: Bearer <token>``; a
   token that is malformed, unknown or revoked is a 401. Without the header,
   Django's session may authenticate a logged-in user (reads only).
2. A request without a token from a trusted network
   (``FLEETWATCH_TRUSTED_NETWORKS``) may read and write: old CacheRoute
   clients send none.
3. A write (POST) needs a token of the endpoint's scope (``instance`` for
   the Proxy's instance endpoints, ``proxy`` for the Scheduler's; placement,
   a read sent as a POST, takes ``route`` or ``read``, its feedback
   ``route``); an instance token bound to ids may speak only for those (403
   otherwise).
4. A read needs any valid token or a logged-in staff user.
5. ``FLEETWATCH_AUTH=off`` switches all of it off.

Nothing is written on a 401 or a 403: the checks run before the view.
"""

import functools
import ipaddress

from django.conf import settings
from rest_framework import authentication, exceptions, permissions, throttling

from controlplane import clock
from controlplane.api import ratelimit
from controlplane.api.tokens import ApiToken, Grant, Scope, TokenCache

# One per process: verified tokens are remembered a few seconds (see tokens.py).
TOKEN_CACHE = TokenCache()
TRUSTED_NETWORK = Grant(0, "trusted network", "*", frozenset())


def verify_token(secret):
    return TOKEN_CACHE.verify(secret, ApiToken.objects.grant_for, ApiToken.objects.mark_used)


class TokenUser:
    """The ``request.user`` of a token-authenticated request."""

    is_authenticated = True
    is_active = True
    is_staff = False

    def __init__(self, grant):
        self.grant = grant
        self.username = f"token:{grant.name}"

    def __str__(self):
        return self.username


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        keyword, _, secret = header.partition(" ")
        if keyword.lower() != "bearer" or not secret.strip():
            raise exceptions.AuthenticationFailed("Malformed Authorization header.")
        grant = verify_token(secret.strip())
        if grant is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked token.")
        return TokenUser(grant), grant

    def authenticate_header(self, request):
        return self.keyword


class StaffSessionAuthentication(authentication.SessionAuthentication):
    """A logged-in user of the dashboards; the read permission asks for staff."""


@functools.lru_cache(maxsize=8)
def _networks(cidrs):
    return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in cidrs)


def from_trusted_network(request):
    """A request without a token from one of ``FLEETWATCH_TRUSTED_NETWORKS`` (the peer address;
    behind a reverse proxy, list the proxy only if every client behind it is trusted)."""
    cidrs = tuple(settings.FLEETWATCH_TRUSTED_NETWORKS)
    if not cidrs or request.META.get("HTTP_AUTHORIZATION"):
        return False
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in network for network in _networks(cidrs))


def instance_id_of(data):
    """The instance a write speaks for, as the Proxy will name it (None when the body has none)."""
    if not isinstance(data, dict):
        return None
    instance_id = data.get("instance_id")
    if isinstance(instance_id, str) and instance_id.strip():
        return instance_id.strip()
    if "host" in data and "port" in data:  # a register that lets the Proxy name it
        return f"hp_{data['host']}:{data['port']}"
    return None


class ScopedAccess(permissions.BasePermission):
    """Writes need a token of the view's ``write_scope`` (a scope or a tuple of them); reads any token or a
    staff session."""

    message = "forbidden"

    def has_permission(self, request, view):
        grant = request.auth if isinstance(request.auth, Grant) else None
        allowed, request.auth = may_access(request, grant, request.data, view.write_scope)
        if not allowed:
            self.message = refusal_detail(request, grant, view.write_scope)  # DRF's 403 carries it
        return allowed


def may_access(request, grant, data, write_scope, scoped_read=False):
    """The access policy itself: ``(allowed, grant)`` for a request authenticated as ``grant``
    (or None); a trusted network's token-less request comes back with a grant of its own.
    ``scoped_read``: a GET that needs ``write_scope`` as a write would (placement for nginx's ``auth_request``)."""
    if not settings.FLEETWATCH_AUTH:
        return True, grant
    if grant is None and from_trusted_network(request):
        return True, TRUSTED_NETWORK
    if request.method in permissions.SAFE_METHODS and not scoped_read:
        user = request.user
        return grant is not None or bool(user and user.is_authenticated and user.is_staff), grant
    scopes = write_scope if isinstance(write_scope, tuple) else (write_scope,)
    if grant is None or grant.scope not in scopes:
        return False, grant
    if grant.scope == Scope.INSTANCE and grant.instance_ids:
        instance_id = instance_id_of(data)
        return instance_id is None or grant.allows_instance(instance_id), grant
    return True, grant


def refusal_detail(request, grant, write_scope, scoped_read=False):
    """What a 403 says was needed, as the envelope's ``detail``, for a request ``may_access`` refused as ``grant``:
    the scope (and the one the token has), an instance id of the token's own, or a staff session."""
    if request.method in permissions.SAFE_METHODS and not scoped_read:
        return {"session": ["Reads need a valid token or the session of a staff user."]}
    scopes = write_scope if isinstance(write_scope, tuple) else (write_scope,)
    if grant is None or grant.scope not in scopes:
        held = f"; this one's scope is {grant.scope}" if grant is not None else ""
        return {"scope": [f"Needs a token of scope {' or '.join(map(str, scopes))}{held}."]}
    return {"instance_id": ["This token is bound to other instance ids."]}


def write_allowance(request, grant, data):
    """``(allowed, retry_after_s)`` of a write: the rate limit per token (or address) and instance id."""
    if not settings.FLEETWATCH_RATE_LIMIT:
        return True, 0
    who = f"token{grant.token_id}" if grant is not None and grant.token_id else f"addr{request.META.get('REMOTE_ADDR')}"
    return ratelimit.COUNTER.hit(f"{who}:{instance_id_of(data)}", clock.now())


class WriteRateThrottle(throttling.BaseThrottle):
    """429 with Retry-After once a token (per instance id) passes ``FLEETWATCH_RATE_LIMIT`` writes a window."""

    def allow_request(self, request, view):
        if request.method in permissions.SAFE_METHODS:
            return True
        grant = request.auth if isinstance(request.auth, Grant) else None
        allowed, self.retry_after = write_allowance(request, grant, request.data)
        return allowed

    def wait(self):
        return self.retry_after

"""This proxy's identity and settings as the rest of the app reads them."""

from django.conf import settings

from controlplane import clock, liveness
from proxy_app.aggregation import build_pool_resource
from proxy_app.models import Instance


def ttl_s():
    return Instance.ttl_s()


def heartbeat_interval_s():
    return liveness.heartbeat_interval_for_ttl(ttl_s())


def advertised_address():
    """(host, port) this Proxy registers with the Scheduler."""
    return settings.FLEETWATCH_ADVERTISE_HOST or "127.0.0.1", settings.FLEETWATCH_ADVERTISE_PORT or 8000


def advertised_url():
    host, port = advertised_address()
    return f"http://{host}:{port}"


def proxy_id():
    """``FLEETWATCH_PROXY_ID``, else ``hp_{advertise_host}:{advertise_port}`` (SPEC 7)."""
    host, port = advertised_address()
    return settings.FLEETWATCH_PROXY_ID or f"hp_{host}:{port}"


def pool_resource(now=None):
    """The pool summary sent to the scheduler, computed with SQL aggregates."""
    now = clock.now() if now is None else now
    totals = Instance.objects.pool_totals(now, ttl_s())
    return build_pool_resource(
        totals, now=now, ttl_s=ttl_s(), capacity=settings.FLEETWATCH_PROXY_CAPACITY, proxy_id=proxy_id()
    )

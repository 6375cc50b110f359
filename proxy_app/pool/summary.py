"""This pool as a whole: the Proxy's identity and its pool_resource (SPEC 5, 7)."""

from django.conf import settings

from controlplane import clock
from proxy_app.models import Instance
from proxy_app.pool.answers import build_pool_resource
from proxy_app.pool.columns import LEDGER


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


def default_scheduler_url():
    """``FLEETWATCH_SCHEDULER_URL``, else this process when it is the scheduler too; "" for none."""
    if settings.FLEETWATCH_SCHEDULER_URL:
        return settings.FLEETWATCH_SCHEDULER_URL.rstrip("/")
    if "scheduler" in settings.FLEETWATCH_ROLES:
        return advertised_url()
    return ""


def pool_totals(now):
    """The raw inputs of pool_resource, from this process's columns of the pool (``proxy_app.pool.columns``)."""
    return LEDGER.totals(now)


def pool_resource(now=None):
    """The pool summary sent to the scheduler, over every report committed before it."""
    now = clock.now() if now is None else now
    return build_pool_resource(
        pool_totals(now), now=now, ttl_s=Instance.ttl_s(), capacity=settings.FLEETWATCH_PROXY_CAPACITY,
        proxy_id=proxy_id(),
    )

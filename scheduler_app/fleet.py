"""The scheduler's liveness settings as the rest of the app reads them."""

from django.conf import settings

from scheduler_app.models import Proxy


def ttl_s():
    return Proxy.ttl_s()


def heartbeat_interval_s():
    """The interval proxies are told to heartbeat at (``FLEETWATCH_PROXY_HEARTBEAT_S``)."""
    return settings.FLEETWATCH_PROXY_HEARTBEAT_S


def heartbeat_interval_wire():
    """The interval as answered on register: an int when integral.

    The original answered an int and its clients may parse it as one; a
    sub-second setting still goes out as the float it is.
    """
    interval = float(heartbeat_interval_s())
    return int(interval) if interval.is_integer() else interval

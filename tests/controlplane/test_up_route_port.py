"""Where ``up`` puts the routers' own listener (issue 30): asked for, none, or the web port + 1 when it is free."""

import logging
import socket

from controlplane.ops.up import route_port_of


def test_an_asked_port_is_taken_as_it_is_and_zero_is_none():
    assert route_port_of("127.0.0.1", 8000, 9100) == 9100
    assert route_port_of("127.0.0.1", 8000, 0) is None


def free_pair():
    """A port whose successor is free too (both released: nothing here listens on them)."""
    for _ in range(50):
        with socket.socket() as web, socket.socket() as route:
            web.bind(("127.0.0.1", 0))
            port = web.getsockname()[1]
            try:
                route.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port
    raise AssertionError("no two consecutive free ports")


def test_by_default_the_next_port_when_it_is_free():
    port = free_pair()
    assert route_port_of("127.0.0.1", port, None) == port + 1


def test_by_default_none_with_a_warning_when_the_next_port_is_taken(caplog):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1] - 1
        with caplog.at_level(logging.WARNING, logger="fleetwatch.up"):
            assert route_port_of("127.0.0.1", port, None) is None
    assert f"port {port + 1} is taken: no route listener" in caplog.text


def test_an_asked_port_that_is_taken_or_the_web_port_is_refused():
    import pytest
    from django.core.management.base import CommandError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(CommandError, match=f"port {port} .*is taken at 127.0.0.1"):
            route_port_of("127.0.0.1", port - 1, port)
    with pytest.raises(CommandError, match="is the web port"):
        route_port_of("127.0.0.1", 8000, 8000)

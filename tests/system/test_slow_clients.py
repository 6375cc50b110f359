"""Clients that send their headers a byte a second cannot starve the server up starts (issue 11)."""

import socket
import threading
import time

import pytest
import requests

pytestmark = pytest.mark.live

SLOW_CONNECTIONS = 200


def dribble(port, stop, opened):
    """Open a connection and send a request's headers one byte a second, never finishing them."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            opened.release()
            for byte in b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"x" * 600:
                if stop.wait(1.0):
                    return
                sock.send(bytes([byte]))
    except OSError:
        pass  # the server dropped us: that is what it should do


def test_it_answers_healthz_while_200_connections_dribble_headers(servers):
    server = servers(roles="proxy").start()
    stop, opened = threading.Event(), threading.Semaphore(0)
    threads = [threading.Thread(target=dribble, args=(server.port, stop, opened), daemon=True)
               for _ in range(SLOW_CONNECTIONS)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(SLOW_CONNECTIONS):
            assert opened.acquire(timeout=30), "could not open the slow connections"
        answered = []
        for _ in range(10):
            # A normal client gets its answer within a second, probe after probe.
            answered.append(requests.get(server.url + "/healthz", timeout=1).status_code)
            time.sleep(0.3)
        assert answered == [200] * 10
    finally:
        stop.set()

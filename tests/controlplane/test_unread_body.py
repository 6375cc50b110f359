"""An answer given before the request's body was read says ``Connection: close`` (``controlplane.ops.unread_body``).

The rule over WSGI, on an application that reads as much of the body as a test tells it to; over a real
connection, on both entry points and every refusal, ``tests/system/test_keep_alive.py``.
"""

import io

import pytest

from controlplane.ops.unread_body import ClosingUnreadBodies

BODY = b'{"instance_id": "i-1"}'


def reading(size, headers=()):
    """A WSGI application that reads ``size`` bytes of the body (``-1``: all of it) and answers 401."""

    def app(environ, start_response):
        if size:
            environ["wsgi.input"].read(size)
        start_response("401 Unauthorized", [("Content-Type", "application/json"), *headers])
        return [b'{"ok":false,"error":"unauthorized"}']

    return app


def answer(app, body=BODY, **environ):
    environ = {"REQUEST_METHOD": "POST", "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body), **environ}
    answered = {}

    def start_response(status, headers, exc_info=None):
        answered["status"], answered["headers"] = status, headers

    content = b"".join(ClosingUnreadBodies(app)(environ, start_response))
    return answered["status"], dict(answered["headers"]), content


@pytest.mark.parametrize("size", [0, 5])
def test_it_closes_the_connection_after_answering_with_the_body_unread(size):
    status, headers, content = answer(reading(size))
    assert status == "401 Unauthorized" and headers["Connection"] == "close"
    assert content == b'{"ok":false,"error":"unauthorized"}'


@pytest.mark.parametrize("size", [-1, len(BODY)])
def test_it_keeps_it_open_once_the_body_is_read(size):
    assert "Connection" not in answer(reading(size))[1]


def test_it_keeps_it_open_for_a_request_without_a_body():
    assert "Connection" not in answer(reading(0), body=b"")[1]


@pytest.mark.parametrize("environ", [{"HTTP_TRANSFER_ENCODING": "chunked", "CONTENT_LENGTH": ""},
                                     {"CONTENT_LENGTH": "12x"}])
def test_it_closes_it_after_a_body_whose_end_it_cannot_know(environ):
    assert answer(reading(-1), **environ)[1]["Connection"] == "close"


def test_it_says_it_once_when_the_answer_already_does():
    status, headers, _ = answer(reading(0, headers=[("Connection", "close")]))
    assert headers == {"Content-Type": "application/json", "Connection": "close"}


def test_it_leaves_a_server_that_drains_the_body_itself_alone():
    # Django's runserver (wsgiref) reads what is left, and refuses a hop-by-hop header from the application.
    assert "Connection" not in answer(reading(0), SERVER_SOFTWARE="WSGIServer/0.2 CPython/3.11")[1]

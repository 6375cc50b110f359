"""An answer given before the request's body was read says ``Connection: close`` (issue 30).

The web server (granian, over hyper) answers whatever the application
returns; when the request's body was not read to its end, it reads what has
already arrived of it and, when that is not all of it, closes the connection
after the answer without saying so. A keep-alive client then sends its next
request into a closed connection and loses it (``RemoteDisconnected``, or
EPIPE on sending). Every refusal given before the body is read does this some
of the time: a 401 (the token is checked first), a 503 when the token lookup
finds no database, a 405, a 400 for a wrong ``Host:``, and on Django's paths
DRF's 403, 415 and 429 too, which it decides before parsing.

``ClosingUnreadBodies`` wraps what ``up`` serves (both entry points: the hot
lane and Django behind it) and applies one rule to every answer: if the body
the request declares (a ``Content-Length`` above 0, or a chunked one, which
neither entry point reads) was not read to its end, the answer says
``Connection: close``, so the client opens a new connection for its next
request. The body is never drained instead: draining would let a client
without a token hold a worker by declaring a body and never sending it.

Servers that drain an unread body themselves are left alone: Django's
``runserver`` (wsgiref), which moreover refuses a hop-by-hop header from the
application.
"""

from controlplane.api.body_length import CHUNKED, declared_length

CLOSE = ("Connection", "close")
DRAINING_SERVERS = ("WSGIServer/",)  # wsgiref's SERVER_SOFTWARE, as Django's runserver sets it


def declares_body(environ):
    """Whether the request declares a body (a ``Content-Length`` other than 0, or ``Transfer-Encoding``)."""
    try:
        return declared_length(environ) != 0
    except ValueError:  # a body of a length that is not a number
        return True


def body_left_unread(environ, read):
    """Whether a request that declares a body was answered with less than all of it read (``read`` bytes)."""
    try:
        length = declared_length(environ)
    except ValueError:  # refused as not a number (400); its end cannot be known
        return True
    # No length (chunked): refused unread (411), and its end cannot be known either.
    return length is CHUNKED or read < length


class CountingInput:
    """``wsgi.input`` as the application reads it, counting the bytes it is given."""

    __slots__ = ("stream", "read_bytes")

    def __init__(self, stream):
        self.stream = stream
        self.read_bytes = 0

    def read(self, *size):
        data = self.stream.read(*size)
        self.read_bytes += len(data)
        return data

    def readline(self, *size):
        data = self.stream.readline(*size)
        self.read_bytes += len(data)
        return data

    def readlines(self, *hint):
        lines = self.stream.readlines(*hint)
        self.read_bytes += sum(map(len, lines))
        return lines

    def __iter__(self):
        return iter(self.readline, b"")


class ClosingUnreadBodies:
    """The WSGI application ``up`` serves: ``app``, its answers saying ``Connection: close`` when the body was left unread."""

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        if not declares_body(environ) or environ.get("SERVER_SOFTWARE", "").startswith(DRAINING_SERVERS):
            return self.app(environ, start_response)
        body = environ["wsgi.input"] = CountingInput(environ["wsgi.input"])
        held = []

        def hold(status, headers, exc_info=None):
            held[:] = (status, headers, exc_info)
            return self._no_write

        answer = self.app(environ, hold)
        status, headers, exc_info = held
        if body_left_unread(environ, body.read_bytes) and not any(name.lower() == "connection" for name, _ in headers):
            headers = [*headers, CLOSE]
        start_response(status, headers, exc_info)
        return answer

    @staticmethod
    def _no_write(data):
        raise NotImplementedError("the applications served here return their body; none calls write()")

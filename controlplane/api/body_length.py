"""The length of the body a request declares, read in one place for every reader of it.

The size limit (``middleware.body_size_refusal``, both entry points), the hot lane's body
(``controlplane.ops.hot_lane``) and the rule that closes a connection whose body was left unread
(``controlplane.ops.unread_body``) all ask this. WSGI reads ``CONTENT_LENGTH`` bytes of a body and
Django reads none without it, so a chunked body (``Transfer-Encoding``, no length) would be read as
empty, and an empty body is "no data": it is refused instead (411), never answered as if it were empty.
"""

CHUNKED = None  # a body sent with Transfer-Encoding: its length is not declared


def declared_length(environ):
    """The body's declared length in bytes (0 when none is declared), or ``CHUNKED``.

    Raises ValueError for a ``Content-Length`` that is not a number.
    """
    if environ.get("HTTP_TRANSFER_ENCODING"):
        return CHUNKED
    return int(environ.get("CONTENT_LENGTH") or 0)

"""Log filters named by ``LOGGING`` in the settings."""

import logging


class OneLineWarning(logging.Filter):
    """A record as one WARNING line without its traceback.

    For what a client did wrong, not the server: Django logs every request
    with a disallowed ``Host:`` as an ERROR with a traceback (two lines and a
    stack per request), although the answer is an ordinary 400.
    """

    def filter(self, record):
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.exc_info = record.exc_text = record.stack_info = None
        return True

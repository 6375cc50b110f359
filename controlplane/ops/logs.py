"""Log filters named by ``LOGGING`` in the settings."""

import logging

from controlplane.db_outage import Outage, is_database_unavailable

# The task cluster's processes' outage (``controlplane.ops.task_broker``): they log through django-q's logger.
TASK_CLUSTER_OUTAGE = Outage("the task cluster runs no task until it is back")


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


class DatabaseOutageFilter(logging.Filter):
    """On the ``django-q`` logger: a record of an unavailable database becomes the task cluster's
    one outage warning (django-q2's scheduler and monitor log every failure with its traceback)."""

    def filter(self, record):
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and is_database_unavailable(exc):
            TASK_CLUSTER_OUTAGE.failed(exc)
            return False
        return True

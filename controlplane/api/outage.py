"""An unavailable database is a 503 ``database_unavailable``, logged once per outage.

When the database cannot be reached (PostgreSQL down or unreachable, a
SQLite file that cannot be opened), Django raises ``OperationalError`` or
``InterfaceError`` from wherever the request touched it: a view, the token
check, the session. ``controlplane.api.errors.server_error`` (Django's
``handler500``, which every middleware's exceptions also reach) answers those
with 503 and ``Retry-After`` instead of 500, without Django's per-request
traceback. Each web process logs the first failure of an outage and, once a
query succeeds again, that the database is back: two lines per process per
outage, however many requests were refused (``controlplane.db_outage``,
as every other process of ``up`` does). Nothing is kept to retry: a refused
write was not acknowledged, and the client sends it again.
"""

from django.db import connection

from controlplane.db_outage import Outage, is_database_unavailable  # noqa: F401 - the web's rule, used by errors

RETRY_AFTER_S = 5

OUTAGE = Outage("answering 503 database_unavailable until it is back")


class QueriesSucceeded:
    """A query wrapper: whether any query of this request succeeded."""

    def __init__(self):
        self.any = False

    def __call__(self, execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        self.any = True
        return result


class DatabaseRecoveryMiddleware:
    """During an outage, ends it at the first request that ran queries and was not refused.

    Only then are this request's queries watched; otherwise it costs one
    attribute read. A request that never touches the database (``/healthz``)
    says nothing about it.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return answered_watching_recovery(self.get_response, request)


def answered_watching_recovery(answer, *args):
    """``answer(*args)``, ending an outage if its queries ran and it was not refused
    (``DatabaseRecoveryMiddleware``'s rule, and the hot lane's)."""
    if OUTAGE.since is None:
        return answer(*args)
    queries = QueriesSucceeded()
    with connection.execute_wrapper(queries):
        response = answer(*args)
    if queries.any and response.status_code != 503:
        OUTAGE.recovered()
    return response

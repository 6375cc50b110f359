"""The private Django APIs this project leans on, in one place (checked by ``tests/controlplane/test_private_django.py``).

Each is a name Django does not document or promise to keep: the hot lane and
the SQLite backend use them to do what Django's request and transaction
machinery does without its per-request cost. On a Django release they were
not checked against, the test fails and names each one to re-read; update
``CHECKED_ON`` once they all still mean what the code takes them to mean.
"""

# (major, minor) of the Django release every entry below was read against.
CHECKED_ON = (5, 2)

# (dotted path of the module, attribute path inside it, the file that uses it, why[, the name that file uses
# when it is not the attribute's own: an attribute Django's code reads, found in that code's source]).
PRIVATE_APIS = (
    ("django.dispatch.dispatcher", "Signal._live_receivers", "controlplane/ops/hot_lane.py",
     "the receivers of request_started/finished, called without the signal's dispatch"),
    ("django.http.request", "HttpRequest._get_raw_host", "controlplane/ops/hot_lane.py",
     "get_host() on the lane's own request record"),
    ("django.core.handlers.wsgi", "get_script_name", "controlplane/ops/hot_lane.py",
     "the request's path as Django builds it"),
    ("django.utils.http", "parse_header_parameters", "controlplane/ops/hot_lane.py",
     "the Content-Type as Django parses it"),
    ("django.utils.log", "log_response", "controlplane/ops/hot_lane.py",
     "an error answer logged as django.request logs it"),
    ("django.utils.log", "log_response", "controlplane/api/errors.py",
     "an answer Django must not log again (an outage's 503, a placement verdict)", "_has_been_logged"),
    ("django.db.backends.sqlite3.base", "DatabaseWrapper._start_transaction_under_autocommit",
     "controlplane/sqlite_backend/base.py", "BEGIN IMMEDIATE behind the writer queue"),
    ("django.db.backends.base.base", "BaseDatabaseWrapper._commit", "controlplane/sqlite_backend/base.py",
     "the writer queue released after COMMIT"),
    ("django.db.backends.base.base", "BaseDatabaseWrapper._rollback", "controlplane/sqlite_backend/base.py",
     "the writer queue released after ROLLBACK"),
    ("django.db.backends.base.base", "BaseDatabaseWrapper._close", "controlplane/sqlite_backend/base.py",
     "the writer queue released when the connection closes"),
    ("django.db.backends.postgresql.base", "ServerBindingCursor", "controlplane/series/queries.py",
     "a cursor that binds on the server, for binary results"),
)

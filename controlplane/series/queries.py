"""Reading many rows quickly: the driver's values, without Django's per-value converters.

For reads of thousands of rows (lists, series) Django's converters and model
instances cost more than the database; these hand back plain tuples, and
JSON columns as their text, for answers that splice them in unparsed.
"""

from django.db import connections
from django.db.models import F, Func, TextField


def raw_rows(queryset):
    """The rows of a ``values_list`` queryset as the driver returns them."""
    sql, params = queryset.query.get_compiler(queryset.db).as_sql()
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def raw_row_batches(queryset, size):
    """``raw_rows`` of one query in lists of up to ``size`` rows, each fetched when the one before is used:
    an answer built and encoded a batch at a time reuses the same few megabytes for every batch.

    On PostgreSQL the rows come in binary: a float is its eight bytes, where as text the server writes
    and the driver parses its shortest decimal (a third of the driver's time on a 10,000-row list). The
    values are the same; only JSON columns would differ (parsed, not text), so read them ``as_text``.
    """
    sql, params = queryset.query.get_compiler(queryset.db).as_sql()
    with _binary_cursor(connections[queryset.db]) as cursor:
        cursor.execute(sql, params)
        while batch := cursor.fetchmany(size):
            yield batch


def _binary_cursor(connection):
    """Django's cursor; on PostgreSQL one that binds on the server and reads binary results (Django's
    binds on the client, for which psycopg reads text only), made the way ``connection.cursor()``
    makes its own: the health check, errors translated, the query logged where queries are."""
    if connection.vendor != "postgresql":
        return connection.cursor()
    from django.db.backends.postgresql.base import ServerBindingCursor
    from psycopg.pq import Format

    connection.close_if_health_check_failed()
    connection.ensure_connection()
    with connection.wrap_database_errors:
        cursor = ServerBindingCursor(connection.connection)
        cursor.format = Format.BINARY
        connection.validate_thread_sharing()
        return connection.make_debug_cursor(cursor) if connection.queries_logged else connection.make_cursor(cursor)


class JsonText(Func):
    """A JSON column as its encoded text, for ``raw_rows``: ``str`` on PostgreSQL; ``bytes`` on
    SQLite, where the driver then skips decoding UTF-8 (a third of reading a 10,000-row list).
    With ``null`` (a constant JSON text), that text where the column is SQL NULL."""

    template = "CAST(%(expressions)s AS text)"
    output_field = TextField()

    def __init__(self, expression, null=None):
        if null is not None and "'" in null:
            raise ValueError(f"not a constant SQL can hold: {null!r}")
        super().__init__(expression)
        self.null = null

    def as_sql(self, compiler, connection, **extra_context):
        sql, params = super().as_sql(compiler, connection, **extra_context)
        return (sql if self.null is None else f"COALESCE({sql}, '{self.null}')"), params

    def as_sqlite(self, compiler, connection, **extra_context):
        sql, params = super().as_sql(compiler, connection, template="CAST(%(expressions)s AS BLOB)", **extra_context)
        return (sql if self.null is None else f"COALESCE({sql}, CAST('{self.null}' AS BLOB))"), params


def as_text(field, null=None):
    """A JSON column read as its text (``str`` or UTF-8 ``bytes``), to be spliced into an answer
    with ``orjson.Fragment`` or parsed with ``orjson.loads``; use it with ``raw_rows`` only.
    ``null``: the JSON text read instead of SQL NULL (``"null"``: a Fragment for every row)."""
    return JsonText(F(field), null)

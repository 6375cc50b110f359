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
    an answer built and encoded a batch at a time reuses the same few megabytes for every batch."""
    sql, params = queryset.query.get_compiler(queryset.db).as_sql()
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(sql, params)
        while batch := cursor.fetchmany(size):
            yield batch


class JsonText(Func):
    """A JSON column as its encoded text, for ``raw_rows``: ``str`` on PostgreSQL; ``bytes`` on
    SQLite, where the driver then skips decoding UTF-8 (a third of reading a 10,000-row list)."""

    template = "CAST(%(expressions)s AS text)"
    output_field = TextField()

    def as_sqlite(self, compiler, connection, **extra_context):
        return super().as_sql(compiler, connection, template="CAST(%(expressions)s AS BLOB)", **extra_context)


def as_text(field):
    """A JSON column read as its text (``str`` or UTF-8 ``bytes``), to be spliced into an answer
    with ``orjson.Fragment`` or parsed with ``orjson.loads``; use it with ``raw_rows`` only."""
    return JsonText(F(field))

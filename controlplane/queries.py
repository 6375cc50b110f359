"""Reading many rows quickly: the driver's values, without Django's per-value converters.

For reads of thousands of rows (lists, series) Django's converters and model
instances cost more than the database; these hand back plain tuples, and
JSON columns as their text, for answers that splice them in unparsed.
"""

from django.db import connections
from django.db.models import F, TextField
from django.db.models.functions import Cast


def raw_rows(queryset):
    """The rows of a ``values_list`` queryset as the driver returns them."""
    sql, params = queryset.query.get_compiler(queryset.db).as_sql()
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def as_text(field):
    """A JSON column read as its text, to be spliced into an answer with ``orjson.Fragment``."""
    return Cast(F(field), TextField())

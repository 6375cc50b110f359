"""Reading many rows quickly (``controlplane.series.queries``): the driver's values, in batches, JSON as text.

On PostgreSQL ``raw_row_batches`` reads binary results and ``raw_rows`` text
ones: the values must be the same either way. Runs on SQLite and PostgreSQL.
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from controlplane.series.queries import JsonText, as_text, raw_row_batches, raw_rows
from proxy_app.models import Instance
from tests.factories import T0

pytestmark = pytest.mark.django_db

COLUMNS = ("instance_id", "host", "port", "weight", "inflight", "qps_1m", "gpu_util", "registered_at", "fenced")


@pytest.fixture
def instances():
    """Seven instances whose values need every digit: 17-digit floats, big integers, text beyond ASCII."""
    for n in range(7):
        Instance.objects.create(
            instance_id=f"i-{n}", host=f"hôst-{n}\u2028", port=8000 + n, weight=0.1 + 0.2 * n, inflight=2**62 + n,
            qps_1m=None if n % 2 else 1e-7 * n, gpu_util=100.0, registered_at=T0 + 0.0752738 * n, last_seen_at=T0,
            fenced=bool(n % 3), meta={"n": n} if n % 2 else {}, capabilities=None if n % 3 else {"c": [n, 1.5]})


def text(value):
    """A JSON text as read: ``bytes`` on SQLite, ``str`` on PostgreSQL."""
    return value.decode() if isinstance(value, bytes) else value


def test_it_reads_the_rows_of_one_query_in_batches(instances):
    queryset = Instance.objects.values_list(*COLUMNS)
    with CaptureQueriesContext(connection) as queries:
        batches = list(raw_row_batches(queryset, 3))
    assert [len(batch) for batch in batches] == [3, 3, 1]
    assert len(queries) == 1
    assert [row for batch in batches for row in batch] == raw_rows(queryset) == list(queryset)


def test_it_reads_the_same_values_as_raw_rows_to_the_last_digit(instances):
    queryset = Instance.objects.values_list(*COLUMNS)
    rows = [row for batch in raw_row_batches(queryset, 100) for row in batch]
    assert [tuple(map(type, row)) for row in rows] == [tuple(map(type, row)) for row in raw_rows(queryset)]
    assert [row[3] for row in rows] == [0.1 + 0.2 * n for n in range(7)]
    assert [row[4] for row in rows] == [2**62 + n for n in range(7)]
    assert rows[6][1] == "hôst-6\u2028"


def test_it_reads_json_as_its_text_in_batches_too(instances):
    queryset = Instance.objects.annotate(meta_text=as_text("meta")).values_list("meta_text", flat=True)
    assert [text(value) for batch in raw_row_batches(queryset, 2) for value in batch] == \
        [text(value) for value in raw_rows(queryset)]


def test_it_reads_json_text_in_place_of_sql_null_where_asked(instances):
    queryset = Instance.objects.annotate(
        plain=as_text("capabilities"), or_null=as_text("capabilities", null="null"),
    ).values_list("plain", "or_null")
    for plain, or_null in raw_rows(queryset):
        assert text(or_null) == ("null" if plain is None else text(plain))


def test_it_takes_only_a_constant_for_sql_null():
    with pytest.raises(ValueError):
        JsonText("meta", null="'); drop table x; --")

"""PostgreSQL's ingest statement stays within what psycopg caches the parse of.

psycopg (client-side binding, as Django uses it) converts a statement's
``%s`` placeholders by parsing its text; it keeps that parse for a statement
of at most ``MAX_CACHED_STATEMENT_LENGTH`` bytes and ``MAX_CACHED_STATEMENT_PARAMS``
values, and parses a larger one again at every execution. The snapshot's one
statement (``proxy_app.ingest.sql._touch_and_store_sql``) runs for every
report, so past either limit each report costs ~0.1 ms more web CPU
(bench/README.md, "Issue 33: the 1 Hz soak").
"""

import pytest
from django.db import connection
from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH, MAX_CACHED_STATEMENT_PARAMS

from proxy_app.ingest.store import IngestResult, ingest_snapshot
from tests.factories import T0, make_engine, make_snapshot

pytestmark = pytest.mark.django_db

WHY = ("psycopg parses a statement past {limit} again at every execution instead of caching its parse, "
       "and this one runs for every report (~0.1 ms of web CPU each): shorten it (plain lowercase column names "
       "go bare, values need no cast) or split what it sends")


@pytest.fixture
def sent(register_instance, frozen):
    """The statements and values a report sends to psycopg."""
    if connection.vendor != "postgresql":
        pytest.skip("the one-statement ingest is PostgreSQL's")
    register_instance("i-1")
    statements = []

    def watching(execute, sql, params, many, context):
        statements.append((sql, params))
        return execute(sql, params, many, context)

    def report(snapshot, seq):
        statements.clear()
        with connection.execute_wrapper(watching):
            assert ingest_snapshot("i-1", snapshot, {"report_seq": seq}, T0 + seq) is IngestResult.STORED
        return list(statements)

    return report


@pytest.mark.parametrize("engines", [[], [make_engine()]], ids=["no engine", "an ok engine"])
def test_the_ingest_statement_is_short_enough_for_psycopg_to_cache(sent, engines):
    (sql, params), = sent(make_snapshot(engines=engines), seq=1)
    size = len(sql.encode())
    assert size <= MAX_CACHED_STATEMENT_LENGTH, (
        f"the ingest statement is {size:,} bytes: " + WHY.format(limit=f"{MAX_CACHED_STATEMENT_LENGTH:,} bytes"))
    values = len(params)
    assert values <= MAX_CACHED_STATEMENT_PARAMS, (
        f"the ingest statement takes {values} values: " + WHY.format(limit=f"{MAX_CACHED_STATEMENT_PARAMS} values"))

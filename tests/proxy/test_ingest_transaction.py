"""The snapshot's write (``proxy_app.ingest.sql.touch_and_store``) outside any test transaction: committed whole or not at all."""

import pytest
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext

from proxy_app.ingest import sql as ingest_sql
from proxy_app.ingest.store import IngestResult, ingest_snapshot
from proxy_app.models import Instance, InstanceResource, InstanceSnapshot
from tests.factories import T0, make_snapshot
from tests.strategies import transaction_open

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alive(register_instance, frozen):
    register_instance("i-1")
    return Instance.objects.get(pk="i-1").last_seen_at


def test_it_commits_the_report_before_it_returns(alive):
    assert ingest_snapshot("i-1", make_snapshot(cpu=42.0), {"report_seq": 1}, T0 + 1) is IngestResult.STORED
    assert not connection.in_atomic_block
    assert not transaction_open()
    assert Instance.objects.get(pk="i-1").last_seen_at == T0 + 1
    assert InstanceResource.objects.get(pk="i-1").cpu_util == 42.0
    assert InstanceSnapshot.objects.get(pk="i-1").raw_resource["devices"]["cpu"]["utilization_pct"] == 42.0


def test_a_late_report_commits_the_contact_alone(alive):
    ingest_snapshot("i-1", make_snapshot(cpu=42.0), {"report_seq": 5}, T0 + 1)
    assert ingest_snapshot("i-1", make_snapshot(cpu=7.0), {"report_seq": 4}, T0 + 2) is IngestResult.STALE
    assert Instance.objects.get(pk="i-1").last_seen_at == T0 + 2
    assert InstanceResource.objects.get(pk="i-1").cpu_util == 42.0


def test_a_statement_that_fails_leaves_nothing_of_the_report(alive, monkeypatch):
    broken = lambda *key: "INSERT INTO no_such_table VALUES (%s)"  # noqa: E731
    monkeypatch.setattr(ingest_sql, "_snapshot_sql", broken)  # SQLite: the last of its three statements
    monkeypatch.setattr(ingest_sql, "_touch_and_store_sql", broken)  # PostgreSQL: its one statement
    with pytest.raises(DatabaseError):
        ingest_snapshot("i-1", make_snapshot(), {}, T0 + 1)
    assert Instance.objects.get(pk="i-1").last_seen_at == alive
    assert not InstanceResource.objects.filter(pk="i-1").exists()
    monkeypatch.undo()
    assert ingest_snapshot("i-1", make_snapshot(), {}, T0 + 2) is IngestResult.STORED  # the write queue is free again


def test_what_watches_statements_sees_each_of_the_report(alive):
    """SQLite runs the report's statements on the driver's cursor unless something watches them: then
    an execute_wrapper and the query log see every one, and the report is committed all the same."""
    seen = []

    def watching(execute, sql, params, many, context):
        seen.append(sql.split()[0].upper())
        return execute(sql, params, many, context)

    with connection.execute_wrapper(watching), CaptureQueriesContext(connection) as logged:
        assert ingest_snapshot("i-1", make_snapshot(cpu=42.0), {"report_seq": 1}, T0 + 1) is IngestResult.STORED
    sqlite = connection.vendor == "sqlite"
    statements = ["BEGIN", "UPDATE", "INSERT", "INSERT"] if sqlite else ["WITH"]
    assert seen == statements
    assert [query["sql"].split()[0].upper() for query in logged.captured_queries] == (
        [*statements, "COMMIT"] if sqlite else statements)
    assert not transaction_open()
    assert InstanceResource.objects.get(pk="i-1").cpu_util == 42.0

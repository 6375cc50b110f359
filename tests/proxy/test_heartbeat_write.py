"""A heartbeat's contact UPDATE (``LivenessManager.touch_alive``) outside any test transaction: committed before
it returns, seen by what watches statements, its errors Django's."""

import pytest
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext

from controlplane.endpoints import managers
from proxy_app.managers import Heartbeat
from proxy_app.models import Instance
from tests.factories import T0
from tests.strategies import transaction_open

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alive(register_instance, frozen):
    register_instance("i-1")


def test_it_commits_the_heartbeat_before_it_returns(alive):
    assert Instance.objects.heartbeat("i-1", T0 + 1, {"inflight": 3}) == (Heartbeat.OK, None)
    assert not transaction_open()
    instance = Instance.objects.get(pk="i-1")
    assert (instance.last_seen_at, instance.inflight) == (T0 + 1, 3)


def test_what_watches_statements_sees_the_update(alive):
    seen = []

    def watching(execute, sql, params, many, context):
        seen.append(sql.split()[0].upper())
        return execute(sql, params, many, context)

    with connection.execute_wrapper(watching), CaptureQueriesContext(connection) as logged:
        assert Instance.objects.heartbeat("i-1", T0 + 1, {"qps_1m": 1.5}) == (Heartbeat.OK, None)
    assert seen == ["UPDATE"]
    assert [query["sql"].split()[0].upper() for query in logged.captured_queries] == ["UPDATE"]
    assert Instance.objects.get(pk="i-1").qps_1m == 1.5


def test_a_statement_that_fails_raises_djangos_error(alive, monkeypatch):
    broken = "UPDATE no_such_table SET a = %s WHERE b = %s AND c = %s AND d = %s"
    monkeypatch.setattr(managers, "touch_alive_sql", lambda *names: broken)
    with pytest.raises(DatabaseError):
        Instance.objects.touch_alive("i-1", T0 + 1)
    assert not transaction_open()

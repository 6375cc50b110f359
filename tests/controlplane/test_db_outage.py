"""Every process of ``up`` logs a database outage as two lines: one warning when it starts, one when it ends.

``Outage`` itself (``controlplane.db_outage``); the task cluster's broker and its log filter
(``controlplane.ops.task_broker``, ``controlplane.ops.logs``). The link's and the recorder's are in
``tests/proxy/test_link.py`` and ``tests/proxy/test_recorder.py``, every process of a real ``up`` in
``tests/system/test_database_outage.py``.
"""

import logging

import pytest
from django.db import OperationalError, connection

from controlplane.db_outage import Outage
from controlplane.ops import logs, task_broker

REFUSED = OperationalError('connection failed: connection to server at "127.0.0.1" failed\n\tIs the server running?')


def refused(execute, sql, params, many, context):
    raise REFUSED


def outage_records(caplog):
    return [(record.levelname, record.getMessage(), record.exc_info) for record in caplog.records]


def test_it_says_the_start_once_with_the_errors_first_line_and_the_end_once(caplog):
    now = [100.0]
    outage = Outage("the recorder writes no series until it is back", monotonic=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="fleetwatch.database"):
        assert outage.recovered() is False
        assert [outage.failed(REFUSED) for _ in range(3)] == [True, False, False]
        now[0] = 112.5
        assert [outage.recovered(), outage.recovered()] == [True, False]
    assert outage_records(caplog) == [
        ("WARNING", 'database unavailable (connection failed: connection to server at "127.0.0.1" failed): '
                    "the recorder writes no series until it is back", None),
        ("WARNING", "database reachable again after 12.5 s", None),
    ]


@pytest.fixture
def cluster_outage(monkeypatch):
    outage = Outage(logs.TASK_CLUSTER_OUTAGE.consequence)
    monkeypatch.setattr(logs, "TASK_CLUSTER_OUTAGE", outage)
    monkeypatch.setattr(task_broker, "OUTAGE", outage)
    return outage


@pytest.mark.django_db(transaction=True)
def test_the_task_brokers_pusher_finds_no_task_in_an_outage_instead_of_dying(cluster_outage, caplog):
    slept = []
    broker = task_broker.PatientORM(list_key="outage-test", sleep=slept.append)
    with caplog.at_level(logging.INFO), connection.execute_wrapper(refused):
        assert [broker.dequeue(), broker.dequeue()] == [None, None]  # django-q2's ORM broker raised here
    assert slept == [task_broker.WAIT_S] * 2
    assert broker.dequeue() is None  # an empty queue: the outage is over
    messages = [message for _, message, exc in outage_records(caplog) if exc is None]
    assert len(caplog.records) == len(messages) == 2, caplog.text
    assert messages[0] == ('database unavailable (connection failed: connection to server at "127.0.0.1" failed): '
                           f"{cluster_outage.consequence}")
    assert messages[1].startswith("database reachable again after")


def test_a_django_q_traceback_of_an_unavailable_database_becomes_the_outage_warning(cluster_outage, caplog):
    with caplog.at_level(logging.INFO):
        for _ in range(2):
            try:
                raise REFUSED
            except OperationalError:
                logging.getLogger("django-q").exception("Could not create task from schedule")
        try:
            raise ValueError("a bug")
        except ValueError:
            logging.getLogger("django-q").exception("Could not save task result")
    assert [(level, message.split(" (")[0], exc is not None) for level, message, exc in outage_records(caplog)] == [
        ("WARNING", "database unavailable", False), ("ERROR", "Could not save task result", True)]

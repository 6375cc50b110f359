"""The task cluster through a database outage: no process dies, one warning, one line when it is back (issue 30).

django-q2's pusher (the process that pulls tasks from the ORM broker) logs
any error from ``dequeue`` with its traceback, sleeps 10 s and exits, and the
cluster's sentinel starts another, logging ``CRITICAL reincarnated pusher …
after sudden death``: twice in a 12 s PostgreSQL outage, once after the
database was back. ``PatientORM`` (``Q_CLUSTER["broker_class"]``) waits an
outage out instead: a ``dequeue`` that finds no database finds no task, and
the pusher polls on. It can also be made in an outage: the sentinel makes
one as it starts, and an outage then ended the whole cluster, and ``up``
with it. The sentinel's scheduler and the monitor catch their own errors and
log them with a traceback; ``DatabaseOutageFilter`` on the ``django-q``
logger (``controlplane.ops.logs``) turns those into the outage's one
warning. The pusher ends its outage at its first look that answers, every
other process of the cluster at the first connection it opens again.
Only with the ORM broker: with Redis the queue lives outside the database.
"""

import time

from django.db.backends.signals import connection_created
from django_q.brokers.orm import ORM
from django_q.conf import Conf
from django_q.models import OrmQ

from controlplane.db_outage import DATABASE_UNAVAILABLE
from controlplane.ops.logs import TASK_CLUSTER_OUTAGE as OUTAGE

WAIT_S = 1.0  # between two looks at an unavailable database: the pusher checks for a stop in between


def _connected(**kwargs):
    OUTAGE.recovered()


class PatientORM(ORM):
    """django-q2's ORM broker, whose ``dequeue`` waits out an unavailable database instead of raising."""

    def __init__(self, *args, sleep=time.sleep, **kwargs):
        super().__init__(*args, **kwargs)
        self.sleep = sleep
        connection_created.connect(_connected, dispatch_uid="fleetwatch.task_broker")

    @staticmethod
    def get_connection(list_key=None):
        """The queue's queryset; in an outage too. django-q2's looks at the connection first and raised there,
        and every broker is made through it: an outage while the cluster starts ended its sentinel, and ``up``
        with it. The queries made on the queryset meet the outage themselves."""
        try:
            return ORM.get_connection(list_key)
        except DATABASE_UNAVAILABLE:
            return OrmQ.objects.using(Conf.ORM)

    def dequeue(self):
        try:
            tasks = super().dequeue()
        except DATABASE_UNAVAILABLE as exc:
            OUTAGE.failed(exc)  # the next look drops the broken connection (ORM.get_connection) and opens one
            self.sleep(WAIT_S)
            return None
        OUTAGE.recovered()
        return tasks

"""Periodic work of the control planes, scheduled with django-q2.

Each role's app declares its tasks on its AppConfig (``role`` and
``task_minutes``); each task is a thin function in the app's ``tasks.py``
calling one manager method, safe to run twice at once. ``ensure_schedules``
registers the ones this process's roles need, idempotently (``manage.py up``
and ``manage.py register_schedules`` call it).
"""

from dataclasses import dataclass

from django.core.management.base import BaseCommand
from django.utils.module_loading import import_string

from controlplane.ops.roles import role_apps

SCHEDULE_PREFIX = "fleetwatch."


@dataclass(frozen=True)
class PeriodicTask:
    func: str  # dotted path of the task function
    minutes: int

    @property
    def name(self):
        return SCHEDULE_PREFIX + self.func.rsplit(".", 1)[1]


def schedule_of(module, **minutes):
    """The periodic tasks of ``module``'s functions, each run every so many minutes:
    ``schedule_of("proxy_app.tasks", sweep_instances=1)``."""
    return tuple(PeriodicTask(f"{module}.{function}", every) for function, every in minutes.items())


def periodic_tasks(roles):
    """The periodic tasks of the apps that serve ``roles``: their ``task_minutes``, functions of their ``tasks.py``."""
    return [task for config in role_apps(roles) for task in schedule_of(f"{config.name}.tasks", **config.task_minutes)]


def ensure_schedules(roles):
    """Create or update the schedules of ``roles``; remove our others. Idempotent."""
    from django_q.models import Schedule

    wanted = periodic_tasks(roles)
    for task in wanted:
        Schedule.objects.update_or_create(
            name=task.name,
            defaults={"func": task.func, "schedule_type": Schedule.MINUTES, "minutes": task.minutes, "repeats": -1},
        )
    stale = Schedule.objects.filter(name__startswith=SCHEDULE_PREFIX).exclude(name__in=[t.name for t in wanted])
    stale.delete()
    return [task.name for task in wanted]


class TaskCommand(BaseCommand):
    """A management command that runs one periodic task now and prints its result."""

    task_path = ""

    def handle(self, *args, **options):
        result = import_string(self.task_path)()
        self.stdout.write(f"{self.task_path.rsplit('.', 1)[1]}: {result}")

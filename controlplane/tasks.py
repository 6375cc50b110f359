"""Periodic work of both control planes, scheduled with django-q2.

Each task is a thin function in its app's ``tasks.py`` calling one manager
method, safe to run twice at once. ``ensure_schedules`` registers the ones
this process's roles need, idempotently (``manage.py up`` and
``manage.py register_schedules`` call it).
"""

from dataclasses import dataclass

from django.core.management.base import BaseCommand
from django.utils.module_loading import import_string


@dataclass(frozen=True)
class PeriodicTask:
    name: str
    func: str
    minutes: int
    role: str


PERIODIC_TASKS = (
    PeriodicTask("fleetwatch.sweep_instances", "proxy_app.tasks.sweep_instances", 1, "proxy"),
    PeriodicTask("fleetwatch.delete_expired_instances", "proxy_app.tasks.delete_expired_instances", 10, "proxy"),
    PeriodicTask("fleetwatch.prune_instance_history", "proxy_app.tasks.prune_instance_history", 60, "proxy"),
    PeriodicTask("fleetwatch.sweep_proxies", "scheduler_app.tasks.sweep_proxies", 1, "scheduler"),
    PeriodicTask("fleetwatch.delete_expired_proxies", "scheduler_app.tasks.delete_expired_proxies", 10, "scheduler"),
    PeriodicTask("fleetwatch.prune_pool_history", "scheduler_app.tasks.prune_pool_history", 10, "scheduler"),
)


def ensure_schedules(roles):
    """Create or update the schedules of ``roles``; remove our others. Idempotent."""
    from django_q.models import Schedule

    wanted = [task for task in PERIODIC_TASKS if task.role in roles]
    for task in wanted:
        Schedule.objects.update_or_create(
            name=task.name,
            defaults={"func": task.func, "schedule_type": Schedule.MINUTES, "minutes": task.minutes, "repeats": -1},
        )
    stale = Schedule.objects.filter(name__startswith="fleetwatch.").exclude(name__in=[t.name for t in wanted])
    stale.delete()
    return [task.name for task in wanted]


class TaskCommand(BaseCommand):
    """A management command that runs one periodic task now and prints its result."""

    task_path = ""

    def handle(self, *args, **options):
        result = import_string(self.task_path)()
        self.stdout.write(f"{self.task_path.rsplit('.', 1)[1]}: {result}")

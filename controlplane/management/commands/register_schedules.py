from django.conf import settings
from django.core.management.base import BaseCommand

from controlplane.ops.tasks import ensure_schedules


class Command(BaseCommand):
    help = "Register the django-q2 schedules of this process's roles (idempotent)."

    def handle(self, *args, **options):
        for name in ensure_schedules(settings.FLEETWATCH_ROLES):
            self.stdout.write(f"scheduled {name}")

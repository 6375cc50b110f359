from django.conf import settings
from django.core.management.base import BaseCommand

from controlplane.ops.singleton import SingletonLock, stop_event_on_signals, wait_for_lock
from proxy_app.ops import history
from proxy_app.ops.history import run_recorder


class Command(BaseCommand):
    help = ("Every FLEETWATCH_SERIES_INTERVAL_S seconds, store the pool summary (PoolResource) and copy new "
            "snapshots into the instance series, until stopped. One copy runs per database; others stand by.")

    def handle(self, *args, **options):
        stop = stop_event_on_signals()
        lock = SingletonLock("recorder")
        if not wait_for_lock(lock, stop, outage=history.OUTAGE):
            return
        try:
            run_recorder(stop, settings.FLEETWATCH_SERIES_INTERVAL_S)
        finally:
            lock.release()

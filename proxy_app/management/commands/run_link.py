import logging

from django.core.management.base import BaseCommand

from controlplane.ops.singleton import SingletonLock, stop_event_on_signals, wait_for_lock
from proxy_app.pool import link
from proxy_app.pool.link import ProxyLink
from proxy_app.pool.summary import default_scheduler_url

log = logging.getLogger("fleetwatch.link")


class Command(BaseCommand):
    help = ("Register this proxy with the scheduler and heartbeat its pool_resource until stopped. "
            "One copy runs per database; others stand by.")

    def add_arguments(self, parser):
        parser.add_argument("--scheduler-url", default=None, help="Overrides FLEETWATCH_SCHEDULER_URL.")

    def handle(self, *args, scheduler_url=None, **options):
        url = scheduler_url or default_scheduler_url()
        if not url:
            self.stderr.write("run_link: no FLEETWATCH_SCHEDULER_URL and no scheduler role here; nothing to do")
            return
        stop = stop_event_on_signals()
        lock = SingletonLock("link")
        if not wait_for_lock(lock, stop, outage=link.OUTAGE):
            return
        try:
            log.info("scheduler link: reporting to %s", url)
            ProxyLink(url).run(stop)
        finally:
            lock.release()

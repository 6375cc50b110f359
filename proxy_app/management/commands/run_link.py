import logging
import signal
import threading

from django.core.management.base import BaseCommand

from proxy_app.link import ProxyLink
from proxy_app.pool import default_scheduler_url

log = logging.getLogger("fleetwatch.link")


class Command(BaseCommand):
    help = "Register this proxy with the scheduler and heartbeat its pool_resource until stopped."

    def add_arguments(self, parser):
        parser.add_argument("--scheduler-url", default=None, help="Overrides FLEETWATCH_SCHEDULER_URL.")

    def handle(self, *args, scheduler_url=None, **options):
        url = scheduler_url or default_scheduler_url()
        if not url:
            self.stderr.write("run_link: no FLEETWATCH_SCHEDULER_URL and no scheduler role here; nothing to do")
            return
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        log.info("scheduler link: reporting to %s", url)
        ProxyLink(url).run(stop)

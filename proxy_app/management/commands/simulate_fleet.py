"""``manage.py simulate_fleet``: synthetic instances reporting to a Proxy over HTTP.

A thin Django command over the simulator's own command line (``simulator.cli``,
see docs/simulator.md): parse, run, print the summary, fail when requests did;
with ``--routing-benchmark`` (or ``--route P``) the routing benchmark instead.
Without the ``sim`` extra (aiohttp, yarl, rich) it says what to install and
exits 2.
"""

import sys

from django.core.management.base import BaseCommand, CommandError

OWN_PACKAGES = {"simulator", "agent", "controlplane", "proxy_app", "scheduler_app"}

try:
    from simulator import cli
except ModuleNotFoundError as error:
    if (error.name or "").partition(".")[0] in OWN_PACKAGES:
        raise  # a module of this project missing is a bug, not an install to do
    cli = None
    MISSING_EXTRA = (
        f"simulate_fleet needs the `sim` extra (aiohttp, yarl, rich), and this environment has no "
        f"{error.name}. Install it from the repository with "
        "pip install --constraint requirements/lock.txt '.[sim]', or run the command as "
        "./fw manage simulate_fleet …, which installs it.")


class Command(BaseCommand):
    help = cli.HELP if cli else "Simulate a fleet (needs the `sim` extra: pip install '.[sim]')."

    def add_arguments(self, parser):
        if cli is not None:
            cli.add_arguments(parser)

    def run_from_argv(self, argv):
        if cli is None:  # before its options are parsed: without the extra there are none
            self.stderr.write(MISSING_EXTRA)
            sys.exit(2)
        super().run_from_argv(argv)

    def handle(self, *args, **options):
        if cli is None:
            raise CommandError(MISSING_EXTRA, returncode=2)
        routing = options["routing_benchmark"] or options["route"]
        try:
            result = (cli.run_routing if routing else cli.run)(options, self.stdout)
        except cli.ConfigError as error:
            raise CommandError(str(error)) from None
        problem = cli.routing_failure(result) if routing else (result["errors"] and cli.failure(result))
        if problem:
            raise CommandError(problem)

"""``manage.py simulate_fleet``: synthetic instances reporting to a Proxy over HTTP.

A thin Django command over the simulator's own command line (``simulator.cli``,
see docs/simulator.md): parse, run, print the summary, fail when requests did;
with ``--routing-benchmark`` (or ``--route P``) the routing benchmark instead.
"""

from django.core.management.base import BaseCommand, CommandError

from simulator import cli


class Command(BaseCommand):
    help = cli.HELP

    def add_arguments(self, parser):
        cli.add_arguments(parser)

    def handle(self, *args, **options):
        routing = options["routing_benchmark"] or options["route"]
        try:
            result = (cli.run_routing if routing else cli.run)(options, self.stdout)
        except cli.ConfigError as error:
            raise CommandError(str(error)) from None
        problem = cli.routing_failure(result) if routing else (result["errors"] and cli.failure(result))
        if problem:
            raise CommandError(problem)

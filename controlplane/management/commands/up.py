"""``manage.py up``: the whole system on one machine (SPEC 11); what it runs is ``controlplane.ops.up``."""

import argparse

from django.core.management.base import BaseCommand

from controlplane.ops import up


def port_number(lowest):
    """An argparse type: a port from ``lowest`` to 65535, else a usage error (not granian's tracebacks)."""

    def parse(text):
        try:
            port = int(text)
        except ValueError:
            port = None
        if port is None or not lowest <= port <= 65535:
            raise argparse.ArgumentTypeError(f"{text!r} is not a port ({lowest} to 65535)")
        return port

    parse.__name__ = "port"
    return parse


class Command(BaseCommand):
    help = "Run the whole Fleetwatch system: web server, task cluster, scheduler link and a local agent."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1", help="Address to listen on (default 127.0.0.1).")
        parser.add_argument("--port", type=port_number(1), default=8000, help="Port to listen on (default 8000).")
        parser.add_argument("--no-agent", action="store_true", help="Do not start a local agent.")
        parser.add_argument("--workers", type=int, default=None, help="Web worker processes (default: one per CPU, ≤ 8).")
        parser.add_argument("--agent-listen", default=None,
                            help="HTTP address of the local agent (default: the agent's own, 127.0.0.1:9201).")
        parser.add_argument("--route-port", type=port_number(0), default=None,
                            help="Port of the routers' own listener (default: FLEETWATCH_ROUTE_PORT, else the "
                                 "web port + 1 when free; 0: none).")
        parser.add_argument("--no-migrate", action="store_true",
                            help="Do not migrate the database (run `manage.py migrate` as a step of its own first).")

    def handle(self, *args, host, port, no_agent, workers, agent_listen, no_migrate, route_port, **options):
        up.run(self.stdout, host=host, port=port, start_agent=not no_agent, workers=workers, agent_listen=agent_listen,
              apply_migrations=not no_migrate, route_port=route_port)

from django.core.management.base import BaseCommand, CommandError

from controlplane.api.tokens import ApiToken


class Command(BaseCommand):
    help = "Revoke the live API token called NAME; every web process refuses it within a few seconds."

    def add_arguments(self, parser):
        parser.add_argument("name")

    def handle(self, *args, name, **options):
        if not ApiToken.objects.revoke(name):
            raise CommandError(f"no live token is called {name!r}")
        self.stdout.write(f"revoked {name}")

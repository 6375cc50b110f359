from django.core.management.base import BaseCommand, CommandError
from django.db import IntegrityError

from controlplane.api.tokens import ApiToken, Scope


class Command(BaseCommand):
    help = "Create an API token (SPEC 10); the token is printed once, alone on the last line."

    def add_arguments(self, parser):
        parser.add_argument("--scope", required=True, choices=Scope.values)
        parser.add_argument("--name", required=True, help="a name to recognise and revoke it by (unique among live tokens)")
        parser.add_argument("--instance-id", action="append", default=[], dest="instance_ids",
                            help="bind an instance token to this id; repeatable (default: any instance)")

    def handle(self, *args, scope, name, instance_ids, **options):
        if instance_ids and scope != Scope.INSTANCE:
            raise CommandError("--instance-id binds instance tokens only")
        name = name.strip()
        if not name:
            raise CommandError("--name must not be empty")
        try:
            token, secret = ApiToken.objects.issue(name, scope, instance_ids)
        except IntegrityError:
            raise CommandError(f"a live token is already called {name!r}; revoke it first or pick another name") from None
        bound = f", bound to {', '.join(token.instance_ids)}" if token.instance_ids else ""
        self.stderr.write(f"created {scope} token {name!r}{bound}; it is shown once, store it now")
        self.stdout.write(secret)

from django.core.management.base import BaseCommand

from controlplane.api.tokens import ApiToken
from controlplane.clock import date_and_age


class Command(BaseCommand):
    help = "List the API tokens: name, scope, bound instance ids, created, last used, revoked. Never the tokens."

    def handle(self, *args, **options):
        rows = [("NAME", "SCOPE", "STARTS WITH", "INSTANCE IDS", "CREATED", "LAST USED", "REVOKED")]
        for token in ApiToken.objects.all():
            rows.append((
                token.name, token.scope, f"{token.hint}…", ",".join(token.instance_ids) or "any",
                date_and_age(token.created_at), date_and_age(token.last_used_at),
                date_and_age(token.revoked_at) if token.revoked else "no",
            ))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            self.stdout.write("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())

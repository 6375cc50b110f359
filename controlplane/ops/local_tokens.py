"""Tokens that ``manage.py up`` hands to the processes it starts (the local agent, the link).

Kept in ``var/up-tokens.json`` (mode 0600) so a restart reuses them; one
that was revoked, or a file from another database, gets a fresh token under
the same name.
"""

import json
import os

from django.conf import settings
from django.db import transaction

from controlplane.api import tokens
from controlplane.api.tokens import ApiToken


class LocalTokens:
    def __init__(self, path=None):
        self.path = path or settings.VAR_DIR / "up-tokens.json"

    def _load(self):
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    def _save(self, secrets):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            json.dump(secrets, handle, indent=2)

    def token(self, name, scope):
        """The secret of the live token ``name`` of ``scope``, issued now if needed."""
        secrets = self._load()
        secret = secrets.get(name)
        if secret and ApiToken.objects.filter(name=name, scope=scope, digest=tokens.digest(secret),
                                              revoked_at=None).exists():
            return secret
        with transaction.atomic():
            ApiToken.objects.revoke(name)
            _, secret = ApiToken.objects.issue(name, scope)
        secrets[name] = secret
        self._save(secrets)
        return secret

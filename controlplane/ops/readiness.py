"""``GET /readyz``: can this process do its work now? (``/healthz`` says only that it runs.)

The checks, in order, each a name and a verdict ``{"ok": bool, ...detail}``:

- ``database``: one ``SELECT 1`` on this process's connection.
- ``migrations``: no migration on disk is left unapplied (``manage.py up
  --no-migrate`` leaves migrating to a separate step; a web process
  started before that step is not ready).
- then what each role's app adds (``RoleConfig.readiness_checks``, the dotted
  path of a function of ``now`` returning named verdicts): the Proxy's
  recorder and link.

200 when every check is ok, else 503; both name every check, and ``failed``
lists the names of those that are not ok. A database that cannot be reached
fails ``database`` and skips the rest (they all read it). The answer is this
view's own: it never goes through the API's error handling.
"""

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, Error, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import JsonResponse
from django.utils.module_loading import import_string
from rest_framework.views import APIView

from controlplane import clock
from controlplane.api.schema.operations import ready_schema
from controlplane.api.viewsets import JSONOnlyNegotiation
from controlplane.ops.roles import role_apps


def database_check(connection):
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Error as exc:
        # A broken persistent connection is dropped here, so the next probe connects afresh.
        connection.close_if_unusable_or_obsolete()
        return {"ok": False, "error": _first_line(exc)}
    return {"ok": True, "vendor": connection.vendor}


def migrations_check(connection):
    try:
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Error as exc:
        return {"ok": False, "error": _first_line(exc)}
    unapplied = [f"{migration.app_label}.{migration.name}" for migration, backwards in plan if not backwards]
    return {"ok": not unapplied, "unapplied": unapplied}


def readiness(roles, now=None):
    """``(ready, checks)`` of this process for ``roles``."""
    now = clock.now() if now is None else now
    connection = connections[DEFAULT_DB_ALIAS]
    checks = {"database": database_check(connection)}
    if not checks["database"]["ok"]:
        return False, checks
    checks["migrations"] = migrations_check(connection)
    for config in role_apps(roles):
        if config.readiness_checks:
            try:
                checks.update(import_string(config.readiness_checks)(now))
            except Error as exc:
                checks[config.role] = {"ok": False, "error": _first_line(exc)}
    return all(check["ok"] for check in checks.values()), checks


def _first_line(exc):
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


class Readyz(APIView):
    """Open to anyone like ``/healthz``: a load balancer or systemd asks it before sending work."""

    authentication_classes = []
    permission_classes = []
    throttle_classes = []
    content_negotiation_class = JSONOnlyNegotiation

    @ready_schema
    def get(self, request):
        ready, checks = readiness(settings.FLEETWATCH_ROLES)
        failed = [name for name, check in checks.items() if not check["ok"]]
        return JsonResponse({"ok": ready, "roles": settings.FLEETWATCH_ROLES, "checks": checks, "failed": failed},
                            status=200 if ready else 503)


readyz = Readyz.as_view()

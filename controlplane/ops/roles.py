"""The apps behind each role of ``FLEETWATCH_ROLES``.

An app serves a role by declaring it on its AppConfig, along with what the
shared base collects from it: ``role``, its ``urls`` module (mounted by
``controlplane.urls``), ``task_minutes`` (``controlplane.ops.tasks``),
``up_processes(context)`` (``manage.py up``), ``readiness_checks`` (``/readyz``) and ``metrics_collector`` (the
dotted path of its ``/metrics`` collector). The base never imports an app.
"""

from django.apps import AppConfig, apps


class RoleConfig(AppConfig):
    """The AppConfig of an app that serves a role: what the shared base collects from it."""

    role = ""
    metrics_collector = ""  # the dotted path of its /metrics collector
    task_minutes = {}  # its periodic tasks: each function of its tasks.py, and the minutes between runs
    readiness_checks = ""  # the dotted path of its /readyz checks: a function of now -> {name: {"ok", ...}}

    def up_processes(self, up):
        """What ``manage.py up`` runs for the role besides the web server and the task cluster (ProcessSpecs)."""
        return []


def role_apps(roles):
    """The AppConfigs of the apps that serve ``roles``, in INSTALLED_APPS order."""
    return [config for config in apps.get_app_configs() if getattr(config, "role", None) in roles]

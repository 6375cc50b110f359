import logging
import sys

from django.apps import AppConfig
from django.conf import settings

from controlplane.ops.supervisor import ProcessSpec
from controlplane.ops.tasks import PeriodicTask

log = logging.getLogger("fleetwatch.up")


class ProxyAppConfig(AppConfig):
    name = "proxy_app"
    verbose_name = "Proxy: instances of this pool"
    role = "proxy"
    metrics_collector = "proxy_app.metrics.ProxyCollector"
    periodic_tasks = (
        PeriodicTask("proxy_app.tasks.sweep_instances", minutes=1),
        PeriodicTask("proxy_app.tasks.delete_expired_instances", minutes=10),
        PeriodicTask("proxy_app.tasks.rollup_instance_history", minutes=1),
        PeriodicTask("proxy_app.tasks.prune_instance_history", minutes=1),
    )

    def up_processes(self, up):
        """What ``manage.py up`` runs for this role besides the web server and the task cluster."""
        from proxy_app.pool import default_scheduler_url

        # The series writer: a second is finer than django-q2 schedules go.
        processes = [ProcessSpec("recorder", [*up.manage, "run_recorder"])]
        if default_scheduler_url():
            env = {}
            if not settings.FLEETWATCH_SCHEDULER_URL and not settings.FLEETWATCH_SCHEDULER_TOKEN:
                # The link reports to this very process (both roles): up can issue its token.
                env["FLEETWATCH_SCHEDULER_TOKEN"] = up.token("up-link", "proxy") or ""
            processes.append(ProcessSpec("link", [*up.manage, "run_link"], env=env))
        else:
            log.warning("no FLEETWATCH_SCHEDULER_URL and no scheduler role here: this proxy reports to no scheduler")
        if up.start_agent:
            # A convenience: if it cannot run here (its port is taken, say),
            # the control plane keeps running without it.
            processes.append(ProcessSpec(
                "agent", [sys.executable, "-m", "agent", "--proxy-url", up.base_url, "--listen", up.agent_listen],
                env={"FLEETWATCH_AGENT_TOKEN": up.token("up-local-agent", "instance") or ""},
                essential=False,
            ))
        return processes

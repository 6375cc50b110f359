import logging

from django.conf import settings

from controlplane.ops import roles
from controlplane.ops.supervisor import ProcessSpec

log = logging.getLogger("fleetwatch.up")


class ProxyAppConfig(roles.RoleConfig):
    name = "proxy_app"
    verbose_name = "Proxy: instances of this pool"
    role = "proxy"
    metrics_collector = "proxy_app.ops.metrics.ProxyCollector"
    readiness_checks = "proxy_app.ops.readiness.checks"
    task_minutes = {"sweep_instances": 1, "delete_expired_instances": 10, "rollup_instance_history": 1,
                    "prune_instance_history": 1}

    def up_processes(self, up):
        """What ``manage.py up`` runs for this role besides the web server and the task cluster."""
        from agent.launch import DEFAULT_LISTEN
        from proxy_app.ops.local_agent import agent_argv, agent_env
        from proxy_app.pool.summary import default_scheduler_url

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
            processes.append(ProcessSpec("agent", agent_argv(up.agent_listen or DEFAULT_LISTEN, up.base_url),
                                         env=agent_env("up-local-agent"), essential=False))
        return processes

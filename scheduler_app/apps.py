from controlplane.ops import roles


class SchedulerAppConfig(roles.RoleConfig):
    """The Scheduler needs nothing from ``manage.py up`` besides the web server and the task cluster."""

    name = "scheduler_app"
    verbose_name = "Scheduler: proxies of the fleet"
    role = "scheduler"
    metrics_collector = "scheduler_app.metrics.SchedulerCollector"
    task_minutes = {"sweep_proxies": 1, "delete_expired_proxies": 10, "rollup_pool_history": 1,
                    "prune_pool_history": 1}

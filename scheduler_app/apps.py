from controlplane.ops.roles import RoleConfig
from controlplane.ops.tasks import schedule_of


class SchedulerAppConfig(RoleConfig):
    """The Scheduler needs nothing from ``manage.py up`` besides the web server and the task cluster."""

    default = True  # Django's pick among the AppConfigs this module names (RoleConfig too)
    name = "scheduler_app"
    verbose_name = "Scheduler: proxies of the fleet"
    role = "scheduler"
    metrics_collector = "scheduler_app.metrics.SchedulerCollector"
    periodic_tasks = schedule_of("scheduler_app.tasks", sweep_proxies=1, delete_expired_proxies=10,
                                 rollup_pool_history=1, prune_pool_history=1)

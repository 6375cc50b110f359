from django.apps import AppConfig

from controlplane.ops.tasks import PeriodicTask


class SchedulerAppConfig(AppConfig):
    name = "scheduler_app"
    verbose_name = "Scheduler: proxies of the fleet"
    role = "scheduler"
    metrics_collector = "scheduler_app.metrics.SchedulerCollector"
    periodic_tasks = (
        PeriodicTask("scheduler_app.tasks.sweep_proxies", minutes=1),
        PeriodicTask("scheduler_app.tasks.delete_expired_proxies", minutes=10),
        PeriodicTask("scheduler_app.tasks.rollup_pool_history", minutes=1),
        PeriodicTask("scheduler_app.tasks.prune_pool_history", minutes=1),
    )

    def up_processes(self, up):
        """The Scheduler needs nothing besides the web server and the task cluster."""
        return []

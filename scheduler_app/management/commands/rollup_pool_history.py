from controlplane.ops.tasks import TaskCommand


class Command(TaskCommand):
    help = "Run the periodic task scheduler_app.tasks.rollup_pool_history once, now."
    task_path = "scheduler_app.tasks.rollup_pool_history"

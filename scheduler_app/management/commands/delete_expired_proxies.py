from controlplane.ops.tasks import TaskCommand


class Command(TaskCommand):
    help = "Run the periodic task scheduler_app.tasks.delete_expired_proxies once, now."
    task_path = "scheduler_app.tasks.delete_expired_proxies"

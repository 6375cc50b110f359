from controlplane.ops.tasks import TaskCommand


class Command(TaskCommand):
    help = "Run the periodic task proxy_app.tasks.rollup_instance_history once, now."
    task_path = "proxy_app.tasks.rollup_instance_history"

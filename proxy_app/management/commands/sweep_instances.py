from controlplane.ops.tasks import TaskCommand


class Command(TaskCommand):
    help = "Run the periodic task proxy_app.tasks.sweep_instances once, now."
    task_path = "proxy_app.tasks.sweep_instances"

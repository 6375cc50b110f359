from controlplane.ops.tasks import TaskCommand


class Command(TaskCommand):
    help = "Run the periodic task proxy_app.tasks.delete_expired_instances once, now."
    task_path = "proxy_app.tasks.delete_expired_instances"

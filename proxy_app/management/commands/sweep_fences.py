from controlplane.ops.tasks import TaskCommand


class Command(TaskCommand):
    help = ("Run one fence tick now (proxy_app.tasks.sweep_fences): fence on the reports received lately, "
            "let quiet fences down. The recorder runs it every second.")
    task_path = "proxy_app.tasks.sweep_fences"

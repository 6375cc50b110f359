"""The resource row's copy of ``last_seen_at`` and its triggers go (migration 0012 made them).

The pool summary filtered on that copy to scan the resource table alone;
it now reads its figures from columns each web process keeps
(``proxy_app.pool_board``), so nothing reads the copy, and every contact
no longer pays for a trigger that writes the resource row.
"""

import importlib

from django.db import migrations

liveness_copy = importlib.import_module("proxy_app.migrations.0012_resource_last_seen")


class Migration(migrations.Migration):
    dependencies = [("proxy_app", "0012_resource_last_seen")]

    operations = [
        migrations.RunPython(liveness_copy.drop_triggers, liveness_copy.create_triggers),
        migrations.RemoveField(model_name="instanceresource", name="last_seen_at"),
    ]

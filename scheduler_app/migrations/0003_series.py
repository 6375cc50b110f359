from django.db import migrations


class Migration(migrations.Migration):
    """PoolResourceSample becomes the Scheduler's full-resolution pool series (SPEC 9): its
    columns take the shared series names, so rows already stored keep their values."""

    dependencies = [
        ("scheduler_app", "0002_named_states"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="poolresourcesample", name="pool_sample_proxy_time"),
        migrations.RenameField(model_name="poolresourcesample", old_name="received_at", new_name="t"),
        migrations.RenameField(model_name="poolresourcesample", old_name="instances_alive", new_name="alive"),
        migrations.RenameField(model_name="poolresourcesample", old_name="instances_total", new_name="total"),
        migrations.RenameField(model_name="poolresourcesample", old_name="pool_resource", new_name="summary"),
    ]

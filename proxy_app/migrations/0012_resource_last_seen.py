"""Liveness on the resource row: ``InstanceResource.last_seen_at``, a copy the database keeps.

Two triggers, on SQLite and PostgreSQL alike: every UPDATE of
``Instance.last_seen_at`` (the contact UPDATE of a heartbeat or snapshot,
a revive, a re-register, any ORM or admin write) copies it onto the
instance's resource row in the same transaction, and every new resource row
takes it from its instance. No code path has to remember the copy, so it
cannot drift; a report's upsert also writes it (``proxy_app.ingest_sql``),
only so that the trigger then finds nothing to change. Existing rows are
filled here.

SQLite drops a table's triggers when Django rebuilds that table (an
``AlterField`` on either model): ``tests/proxy/test_resource_liveness.py``
fails then, and the migration that rebuilds must create them again
(``create_triggers``).
"""

from django.db import migrations, models

INSTANCE = "proxy_app_instance"
RESOURCE = "proxy_app_instanceresource"
INSTANCE_SEEN = f"(SELECT last_seen_at FROM {INSTANCE} WHERE instance_id = NEW.instance_id)"


def _copy(distinct):
    """The instance's new ``last_seen_at`` onto its resource row, unless the row has it already (a report's
    upsert writes it too: on PostgreSQL a second row version per report saved)."""
    return (f"UPDATE {RESOURCE} SET last_seen_at = NEW.last_seen_at "
            f"WHERE instance_id = NEW.instance_id AND last_seen_at {distinct} NEW.last_seen_at")


def _fill(distinct):
    """A new resource row takes its instance's ``last_seen_at``, whatever wrote the row."""
    return (f"UPDATE {RESOURCE} SET last_seen_at = {INSTANCE_SEEN} "
            f"WHERE instance_id = NEW.instance_id AND last_seen_at {distinct} {INSTANCE_SEEN}")


SQLITE = (
    f"CREATE TRIGGER instance_seen_copy AFTER UPDATE OF last_seen_at ON {INSTANCE} "
    f"FOR EACH ROW BEGIN {_copy('IS NOT')}; END",
    # AFTER INSERT: an upsert that updates an existing row does not fire it.
    f"CREATE TRIGGER resource_seen_fill AFTER INSERT ON {RESOURCE} FOR EACH ROW BEGIN {_fill('IS NOT')}; END",
)
SQLITE_DROP = ("DROP TRIGGER IF EXISTS instance_seen_copy", "DROP TRIGGER IF EXISTS resource_seen_fill")

POSTGRESQL = (
    f"CREATE OR REPLACE FUNCTION instance_seen_copy() RETURNS trigger LANGUAGE plpgsql AS $$ "
    f"BEGIN {_copy('IS DISTINCT FROM')}; RETURN NULL; END $$",
    f"CREATE TRIGGER instance_seen_copy AFTER UPDATE OF last_seen_at ON {INSTANCE} "
    f"FOR EACH ROW EXECUTE FUNCTION instance_seen_copy()",
    f"CREATE OR REPLACE FUNCTION resource_seen_fill() RETURNS trigger LANGUAGE plpgsql AS $$ "
    f"BEGIN {_fill('IS DISTINCT FROM')}; RETURN NULL; END $$",
    # AFTER INSERT fires only for rows an INSERT … ON CONFLICT really inserted, not for each report.
    f"CREATE TRIGGER resource_seen_fill AFTER INSERT ON {RESOURCE} FOR EACH ROW EXECUTE FUNCTION resource_seen_fill()",
)
POSTGRESQL_DROP = (
    f"DROP TRIGGER IF EXISTS instance_seen_copy ON {INSTANCE}", "DROP FUNCTION IF EXISTS instance_seen_copy()",
    f"DROP TRIGGER IF EXISTS resource_seen_fill ON {RESOURCE}", "DROP FUNCTION IF EXISTS resource_seen_fill()",
)


def _run(schema_editor, statements):
    for statement in statements:
        schema_editor.execute(statement, params=None)


def create_triggers(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    _run(schema_editor, {"sqlite": SQLITE_DROP + SQLITE, "postgresql": POSTGRESQL_DROP + POSTGRESQL}[vendor])
    schema_editor.execute(
        f"UPDATE {RESOURCE} SET last_seen_at = (SELECT last_seen_at FROM {INSTANCE} "
        f"WHERE {INSTANCE}.instance_id = {RESOURCE}.instance_id)", params=None)


def drop_triggers(apps, schema_editor):
    _run(schema_editor, {"sqlite": SQLITE_DROP, "postgresql": POSTGRESQL_DROP}[schema_editor.connection.vendor])


class Migration(migrations.Migration):

    dependencies = [
        ('proxy_app', '0011_placement_and_fencing'),
    ]

    operations = [
        migrations.AddField(
            model_name='instanceresource',
            name='last_seen_at',
            field=models.FloatField(blank=True, editable=False, null=True,
                                    help_text="The instance's last_seen_at, copied by the database."),
        ),
        migrations.RunPython(create_triggers, drop_triggers),
    ]

"""Upgrades keep what was stored: a snapshot acknowledged before 0006 is still listed after it."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("proxy_app", "0005_raw_resource_as_text")]
AFTER = [("proxy_app", "0006_snapshot_apart")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


@pytest.fixture
def at_0005():
    """The database as 0005 left it; back at the latest migrations afterwards, whatever the test did."""
    yield _migrate(BEFORE)
    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_it_moves_every_stored_snapshot_into_its_own_table(at_0005):
    old = at_0005
    Instance, InstanceResource = old.get_model("proxy_app", "Instance"), old.get_model("proxy_app", "InstanceResource")
    for n, raw in enumerate(({"schema_version": "resource_snapshot_v1", "n": 1}, {})):
        Instance.objects.create(instance_id=f"i-{n}", host="10.0.0.1", port=8000 + n, registered_at=1.0,
                                last_seen_at=1.0)
        InstanceResource.objects.create(instance_id=f"i-{n}", raw_resource=raw, has_raw_resource=bool(raw))

    new = _migrate(AFTER)
    InstanceSnapshot = new.get_model("proxy_app", "InstanceSnapshot")
    moved = dict(InstanceSnapshot.objects.values_list("instance_id", "raw_resource"))

    assert moved == {"i-0": {"schema_version": "resource_snapshot_v1", "n": 1}, "i-1": {}}
    assert "raw_resource" not in {f.name for f in new.get_model("proxy_app", "InstanceResource")._meta.fields}

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


@pytest.fixture
def at_0008():
    """The database as 0008 left it (capabilities without their empty members); latest afterwards."""
    yield _migrate([("proxy_app", "0008_pool_series_network")])
    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_it_recomputes_every_stored_canonical_form_and_fingerprint(at_0008):
    """Stored by the old canonical form, an instance is told "mismatch" on every beat; after 0009 it matches."""
    Instance = at_0008.get_model("proxy_app", "Instance")
    before = {  # what 0003..0008 stored: empty members dropped, and the digest of that form
        "i-empty": ({"schema_version": "1"},
                    "sha256:5e8693161ce3c913ee2ba9a48f9ba4ee386d8e23a6f49eeab96bae5f08878ead"),
        "i-llama": ({"model": {"identifier": "llama"}, "schema_version": "1"}, "sha256:c6899e85"),
        "i-none": (None, None),
    }
    for n, (instance_id, (capabilities, digest)) in enumerate(before.items()):
        Instance.objects.create(instance_id=instance_id, host="10.0.0.1", port=8000 + n, registered_at=1.0,
                                last_seen_at=1.0, capabilities=capabilities, capability_fingerprint=digest)

    after = _migrate([("proxy_app", "0009_capabilities_keep_empty_members")]).get_model("proxy_app", "Instance")
    rows = {row.instance_id: (row.capabilities, row.capability_fingerprint) for row in after.objects.all()}

    empty = {"adapters": [], "kv_cache": {"layout_parameters": {}}, "model": {}, "parallelism": {},
             "runtime": {"supported_cache_features": []}, "schema_version": "1", "tokenizer": {}}
    assert rows == {  # the original Instance's own fingerprints (tests/proxy/data/capability_vectors.json)
        "i-empty": (empty, "sha256:4794e385053345a129d5862de0a5ee71525162f2cfb5fd95590ba0572bc62c46"),
        "i-llama": ({**empty, "model": {"identifier": "llama"}},
                    "sha256:4e63e59360a6b6a97850ed7ef21cc975dc23f9f5a728a51606207457bc996d41"),
        "i-none": (None, None),
    }


@pytest.fixture
def at_0011():
    """The database as 0011 left it (liveness on the instance row only); latest afterwards."""
    yield _migrate([("proxy_app", "0011_placement_and_fencing")])
    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_it_copies_each_instances_last_contact_onto_its_resource_row(at_0011):
    Instance, InstanceResource = (at_0011.get_model("proxy_app", name) for name in ("Instance", "InstanceResource"))
    for n, seen in enumerate((100.0, 250.5)):
        Instance.objects.create(instance_id=f"i-{n}", host="10.0.0.1", port=8000 + n, registered_at=1.0,
                                last_seen_at=seen)
        InstanceResource.objects.create(instance_id=f"i-{n}", has_raw_resource=True)

    new = _migrate([("proxy_app", "0012_resource_last_seen")])
    copied = dict(new.get_model("proxy_app", "InstanceResource").objects.values_list("instance_id", "last_seen_at"))

    assert copied == {"i-0": 100.0, "i-1": 250.5}
    # The trigger is in place: the next contact is copied too.
    new.get_model("proxy_app", "Instance").objects.filter(pk="i-1").update(last_seen_at=300.0)
    assert new.get_model("proxy_app", "InstanceResource").objects.get(pk="i-1").last_seen_at == 300.0


@pytest.mark.django_db(transaction=True)
def test_dropping_the_copy_leaves_contacts_working_and_going_back_restores_it(at_0011):
    latest = _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
    Instance = latest.get_model("proxy_app", "Instance")
    Instance.objects.create(instance_id="i-0", host="10.0.0.1", port=8000, registered_at=1.0, last_seen_at=100.0)
    latest.get_model("proxy_app", "InstanceResource").objects.create(instance_id="i-0", has_raw_resource=True)
    Instance.objects.filter(pk="i-0").update(last_seen_at=150.0)  # no trigger left to write a dropped column

    back = _migrate([("proxy_app", "0012_resource_last_seen")])
    assert back.get_model("proxy_app", "InstanceResource").objects.get(pk="i-0").last_seen_at == 150.0

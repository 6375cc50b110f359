"""POST /v1/instance/unregister (SPEC 3, 4)."""

import pytest

from proxy_app.models import Instance, InstanceResource, InstanceSample, InstanceSnapshot, InstanceStatusChange
from tests.factories import T0

pytestmark = pytest.mark.django_db


def unregister(api, instance_id):
    return api.post("/v1/instance/unregister", {"instance_id": instance_id})


def test_it_removes_a_known_instance(api, register_instance, report, frozen):
    register_instance("i-1")
    report("i-1")
    response = unregister(api, "i-1")
    assert response.status_code == 200
    assert response.json() == {"ok": True}
    assert not Instance.objects.filter(pk="i-1").exists()
    assert not InstanceResource.objects.filter(instance_id="i-1").exists()
    assert not InstanceSnapshot.objects.filter(instance_id="i-1").exists()


def test_it_answers_not_ok_with_200_for_an_unknown_instance(api, frozen):
    response = unregister(api, "i-nobody")
    assert response.status_code == 200
    assert response.json() == {"ok": False}
    assert not InstanceStatusChange.objects.exists()


def test_it_answers_not_ok_the_second_time(api, register_instance, frozen):
    register_instance("i-1")
    unregister(api, "i-1")
    assert unregister(api, "i-1").json() == {"ok": False}
    assert InstanceStatusChange.objects.filter(new_status="unregistered").count() == 1


def test_it_is_gone_even_with_include_dead(api, register_instance, frozen, listed_instances):
    register_instance("i-1")
    register_instance("i-2")
    unregister(api, "i-1")
    assert set(listed_instances(include_dead="true")) == {"i-2"}
    ids = [row["instance_id"] for row in api.get("/debug/instance_resources", include_dead="true").json()["instances"]]
    assert ids == ["i-2"]
    ids = [row["instance_id"] for row in api.get("/debug/instance_loads").json()["instances"]]
    assert ids == ["i-2"]


def test_it_records_a_last_change_to_unregistered(api, register_instance, frozen):
    register_instance("i-1")
    frozen.shift(4)
    unregister(api, "i-1")
    latest = InstanceStatusChange.objects.filter(instance_id="i-1").first()
    assert (latest.old_status, latest.new_status, latest.reason, latest.at) == ("alive", "unregistered", "unregistered", T0 + 4)


def test_it_removes_a_stale_instance_too(api, register_instance, frozen):
    register_instance("i-1")
    frozen.shift(100)
    Instance.objects.sweep(T0 + 100)
    assert unregister(api, "i-1").json() == {"ok": True}
    latest = InstanceStatusChange.objects.filter(instance_id="i-1").first()
    assert (latest.old_status, latest.new_status) == ("stale", "unregistered")


def test_it_leaves_other_instances_alone(api, register_instance, report, frozen):
    register_instance("i-1")
    register_instance("i-2")
    report("i-2")
    unregister(api, "i-1")
    assert list(Instance.objects.values_list("pk", flat=True)) == ["i-2"]
    assert InstanceResource.objects.filter(instance_id="i-2").exists()


def test_it_lets_an_unregistered_id_register_afresh(api, register_instance, frozen):
    register_instance("i-1", meta={"old": 1})
    unregister(api, "i-1")
    frozen.shift(10)
    register_instance("i-1", meta={"new": 1})
    instance = Instance.objects.get(pk="i-1")
    assert instance.meta == {"new": 1}
    assert instance.registered_at == T0 + 10


@pytest.mark.django_db(transaction=True)
def test_it_commits_the_delete_of_an_instance_and_its_rows(api, register_instance, report, frozen):
    """Outside a test's transaction, so the foreign keys are checked at the commit."""
    register_instance("i-1")
    register_instance("i-2")
    report("i-1")
    report("i-2")
    assert unregister(api, "i-1").json() == {"ok": True}
    assert list(Instance.objects.values_list("pk", flat=True)) == ["i-2"]
    assert list(InstanceResource.objects.values_list("pk", flat=True)) == ["i-2"]
    assert list(InstanceSnapshot.objects.values_list("pk", flat=True)) == ["i-2"]
    assert InstanceStatusChange.objects.filter(instance_id="i-1", new_status="unregistered").count() == 1


def test_it_leaves_the_series_to_the_pruner(api, register_instance, frozen):
    register_instance("i-1")
    InstanceSample.objects.create(instance_id="i-1", t=T0)
    unregister(api, "i-1")
    assert InstanceSample.objects.filter(instance_id="i-1").count() == 1

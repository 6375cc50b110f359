"""The resource row's copy of its instance's ``last_seen_at``, kept by the database on every contact.

Each way an instance is seen must leave the two equal: a report, a late report, a
heartbeat without a snapshot, the slow revive of a stale instance, a
re-register, and a plain ORM write.
"""

import pytest
from proxy_app.models import Instance, InstanceResource
from tests.factories import T0, make_snapshot

pytestmark = pytest.mark.django_db


def _seen(instance_id="i-1"):
    """(the instance's last_seen_at, its resource row's copy)."""
    instance = Instance.objects.values_list("last_seen_at", flat=True).get(pk=instance_id)
    return instance, InstanceResource.objects.values_list("last_seen_at", flat=True).get(pk=instance_id)


def test_it_fills_the_copy_with_the_first_report(frozen, register_instance, report):
    register_instance("i-1")
    frozen.shift(2)
    report("i-1")
    assert _seen() == (T0 + 2, T0 + 2)


def test_it_follows_each_report(frozen, register_instance, report):
    register_instance("i-1")
    report("i-1", seq=1)
    frozen.shift(3)
    report("i-1", seq=2)
    assert _seen() == (T0 + 3, T0 + 3)


def test_it_follows_a_late_report_that_is_not_stored(frozen, register_instance, report):
    register_instance("i-1")
    report("i-1", seq=5)
    frozen.shift(3)
    report("i-1", seq=4)  # late: the resource stays, the contact counts
    assert _seen() == (T0 + 3, T0 + 3)
    assert InstanceResource.objects.get(pk="i-1").report_seq == 5


def test_it_follows_a_heartbeat_without_a_snapshot(frozen, register_instance, report, instance_heartbeat):
    register_instance("i-1")
    report("i-1")
    frozen.shift(4)
    assert instance_heartbeat("i-1", inflight=2).status_code == 200
    assert _seen() == (T0 + 4, T0 + 4)


def test_it_follows_the_revive_of_a_stale_instance(frozen, register_instance, report, instance_heartbeat):
    register_instance("i-1")
    report("i-1")
    frozen.shift(60)  # past the TTL: the contact UPDATE misses, the slow path revives it
    assert instance_heartbeat("i-1").status_code == 200
    assert _seen() == (T0 + 60, T0 + 60)
    frozen.shift(60)
    assert report("i-1", seq=9).json() == {"ok": True}
    assert _seen() == (T0 + 120, T0 + 120)


def test_it_follows_a_re_register(frozen, register_instance, report):
    register_instance("i-1")
    report("i-1")
    frozen.shift(5)
    register_instance("i-1")
    assert _seen() == (T0 + 5, T0 + 5)


def test_it_follows_a_plain_orm_write(frozen, register_instance, report):
    register_instance("i-1")
    report("i-1", snapshot=make_snapshot())
    Instance.objects.filter(pk="i-1").update(last_seen_at=T0 - 100)
    assert _seen() == (T0 - 100, T0 - 100)


def test_it_fills_a_resource_row_written_by_the_orm(frozen, register_instance):
    register_instance("i-1")
    InstanceResource.objects.create(instance_id="i-1", has_raw_resource=True)
    assert _seen() == (T0, T0)

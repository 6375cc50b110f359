"""``Instance.objects.sweep`` and ``delete_expired`` with injected time (SPEC 4).

The manager methods behind the sweep_instances and delete_expired_instances
tasks; every ``now`` is passed in.
"""

import pytest

from proxy_app.models import Instance, InstanceResource, InstanceSnapshot, InstanceStatusChange
from tests.factories import T0

pytestmark = [pytest.mark.django_db, pytest.mark.both_entry_points]

TTL = 30
INTERVAL = 10  # alive window: 15 s


def sweep(at):
    return Instance.objects.sweep(T0 + at)


def changes(instance_id="i-1"):
    return list(
        InstanceStatusChange.objects.filter(instance_id=instance_id).order_by("at", "id")
        .values_list("old_status", "new_status", "reason", "at")
    )


def stored_status(instance_id="i-1"):
    return Instance.objects.get(pk=instance_id).status


@pytest.fixture
def registered(register_instance, frozen):
    register_instance("i-1")
    return "i-1"


def test_it_leaves_an_instance_alive_within_the_alive_window(registered):
    assert sweep(15) == 0
    assert stored_status() == "alive"
    assert changes() == [("", "alive", "registered", T0)]


def test_it_marks_an_instance_suspect_once_a_beat_is_missed(registered):
    assert sweep(16) == 1
    assert stored_status() == "suspect"
    # Stamped when the alive window ran out, not when the sweep noticed.
    assert changes()[-1] == ("alive", "suspect", "missed heartbeats", T0 + 15)


def test_it_keeps_a_suspect_instance_suspect_up_to_the_ttl(registered):
    sweep(16)
    assert sweep(30) == 0
    assert stored_status() == "suspect"


def test_it_marks_a_suspect_instance_stale_past_the_ttl(registered):
    sweep(16)
    assert sweep(31) == 1
    assert stored_status() == "stale"
    assert changes()[-1] == ("suspect", "stale", "missed heartbeats", T0 + TTL)


def test_it_records_each_transition_once(registered):
    sweep(16)
    sweep(16)
    sweep(20)
    sweep(31)
    sweep(31)
    sweep(500)
    assert [(old, new) for old, new, _, _ in changes()] == [("", "alive"), ("alive", "suspect"), ("suspect", "stale")]


def test_it_records_nothing_more_when_run_twice(registered):
    assert sweep(31) == 1
    before = changes()
    assert sweep(31) == 0
    assert sweep(40) == 0
    assert changes() == before


def test_a_sweep_after_the_ttl_records_the_suspect_spell_too(registered):
    assert sweep(31) == 1
    assert stored_status() == "stale"
    # As a timely sweep would have: suspect when the alive window ran out, stale at the TTL.
    assert changes()[1:] == [("alive", "suspect", "missed heartbeats", T0 + 15),
                             ("suspect", "stale", "missed heartbeats", T0 + TTL)]


def test_it_leaves_an_instance_that_heartbeats_alone(registered, instance_heartbeat, frozen):
    for beat in range(1, 11):
        frozen.shift(INTERVAL)
        instance_heartbeat("i-1")
        assert sweep(beat * INTERVAL + 5) == 0
    assert stored_status() == "alive"
    assert len(changes()) == 1


def test_it_sweeps_only_the_instances_that_are_due(register_instance, frozen):
    register_instance("i-quiet")
    frozen.shift(10)
    register_instance("i-chatty")
    assert sweep(20) == 1
    assert stored_status("i-quiet") == "suspect"
    assert stored_status("i-chatty") == "alive"


def test_it_sweeps_in_batches(register_instance, frozen):
    for n in range(5):
        register_instance(f"i-{n}")
    assert Instance.objects.sweep(T0 + 31, batch=2) == 2
    assert Instance.objects.sweep(T0 + 31, batch=2) == 2
    assert Instance.objects.sweep(T0 + 31, batch=2) == 1
    assert Instance.objects.sweep(T0 + 31, batch=2) == 0
    assert set(Instance.objects.values_list("status", flat=True)) == {"stale"}


@pytest.mark.parametrize("reviver", ["heartbeat", "snapshot", "register"])
def test_it_revives_a_stale_instance_that_reports_with_a_recorded_change(registered, instance_heartbeat, report, register_instance,
                                                                         frozen, reviver):
    sweep(31)
    frozen.shift(40)
    {"heartbeat": lambda: instance_heartbeat("i-1"), "snapshot": lambda: report("i-1"), "register": lambda: register_instance("i-1")}[reviver]()
    assert stored_status() == "alive"
    reason = {"heartbeat": "heartbeat", "snapshot": "snapshot", "register": "re-registered"}[reviver]
    assert changes()[-1] == ("stale", "alive", reason, T0 + 40)
    # Alive again, it is swept afresh from its new last_seen_at.
    assert sweep(40 + 15) == 0
    assert sweep(40 + 16) == 1
    assert changes()[-1][:2] == ("alive", "suspect")


def test_it_revives_a_suspect_instance_with_a_recorded_change(registered, instance_heartbeat, frozen):
    sweep(16)
    frozen.shift(20)
    instance_heartbeat("i-1")
    assert stored_status() == "alive"
    assert changes()[-1] == ("suspect", "alive", "heartbeat", T0 + 20)


def test_it_does_not_overwrite_a_heartbeat_that_lands_while_it_runs(registered, monkeypatch):
    from controlplane.endpoints import managers

    real_status_at = managers.liveness.status_at

    def heartbeat_lands_first(*args):
        # Between the sweep's read of due rows and its conditional update.
        Instance.objects.touch("i-1", T0 + 20, "heartbeat")
        return real_status_at(*args)

    monkeypatch.setattr(managers.liveness, "status_at", heartbeat_lands_first)
    assert sweep(20) == 0
    instance = Instance.objects.get(pk="i-1")
    assert (instance.status, instance.last_seen_at) == ("alive", T0 + 20)
    assert len(changes()) == 1


# --- delete_expired -------------------------------------------------------------------------

RETENTION = 24 * 3600


def test_it_deletes_entries_not_seen_for_the_retention(register_instance, report, frozen):
    register_instance("i-old")
    report("i-old")
    frozen.shift(RETENTION)
    register_instance("i-new")
    assert Instance.objects.delete_expired(T0 + RETENTION + 1, RETENTION) == 1
    assert list(Instance.objects.values_list("pk", flat=True)) == ["i-new"]
    assert not InstanceResource.objects.filter(instance_id="i-old").exists()
    assert not InstanceSnapshot.objects.filter(instance_id="i-old").exists()


def test_it_keeps_an_entry_seen_exactly_one_retention_ago(registered):
    assert Instance.objects.delete_expired(T0 + RETENTION, RETENTION) == 0
    assert Instance.objects.filter(pk="i-1").exists()


def test_it_records_the_expiry(registered):
    sweep(31)
    Instance.objects.delete_expired(T0 + RETENTION + 1, RETENTION)
    # Stamped when the retention ran out.
    assert changes()[-1] == ("stale", "expired", "retention passed", T0 + RETENTION)


def test_it_deletes_nothing_more_when_run_twice(registered):
    assert Instance.objects.delete_expired(T0 + RETENTION + 1, RETENTION) == 1
    assert Instance.objects.delete_expired(T0 + RETENTION + 1, RETENTION) == 0
    assert InstanceStatusChange.objects.filter(new_status="expired").count() == 1


def test_it_shows_stale_entries_until_they_expire(registered, frozen, listed_instances):
    frozen.shift(RETENTION)
    assert "i-1" in listed_instances(include_dead="true")
    frozen.shift(1)
    Instance.objects.delete_expired(T0 + RETENTION + 1, RETENTION)
    assert "i-1" not in listed_instances(include_dead="true")


def test_it_records_every_change_for_a_heartbeat_after_an_unswept_stale_spell(api, frozen, register_instance):
    """The sweeper never ran: the suspect and stale spells still show in the history, each at its moment."""
    register_instance("i-1")
    frozen.shift(45)  # past the 30 s TTL, no sweep
    assert api.post("/v1/instance/heartbeat", {"instance_id": "i-1"}).json() == {"ok": True}
    changes = list(InstanceStatusChange.objects.filter(instance_id="i-1").order_by("at", "id")
                   .values_list("old_status", "new_status", "at"))
    assert changes == [
        ("", "alive", T0),
        ("alive", "suspect", T0 + 15),
        ("suspect", "stale", T0 + 30),
        ("stale", "alive", T0 + 45),
    ]


def test_it_revives_on_a_snapshot_after_an_unswept_stale_spell_too(frozen, register_instance, report):
    register_instance("i-1")
    frozen.shift(45)
    assert report("i-1").json() == {"ok": True}
    assert list(InstanceStatusChange.objects.filter(instance_id="i-1").order_by("at", "id")
                .values_list("new_status", flat=True)) == ["alive", "suspect", "stale", "alive"]


def test_a_re_register_after_an_unswept_stale_spell_records_it_too(frozen, register_instance):
    register_instance("i-1")
    frozen.shift(45)
    register_instance("i-1")
    assert changes() == [("", "alive", "registered", T0), ("alive", "suspect", "missed heartbeats", T0 + 15),
                         ("suspect", "stale", "missed heartbeats", T0 + TTL),
                         ("stale", "alive", "re-registered", T0 + 45)]


def test_a_re_register_within_the_ttl_records_no_spell(frozen, register_instance):
    register_instance("i-1")
    frozen.shift(20)  # suspect by now, but no sweep saw it and the TTL has not run out
    register_instance("i-1")
    assert changes() == [("", "alive", "registered", T0)]


def test_a_late_sweep_skips_a_suspect_spell_that_lasts_no_time(registered, settings):
    settings.FLEETWATCH_INSTANCE_TTL_S = 1  # interval 1 s, alive window min(1, 1.5): the TTL itself
    assert sweep(5) == 1
    assert changes()[1:] == [("alive", "stale", "missed heartbeats", T0 + 1)]

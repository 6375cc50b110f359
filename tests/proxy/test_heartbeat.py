"""POST /v1/instance/heartbeat (SPEC 3)."""

import pytest

from proxy_app.managers import Heartbeat
from proxy_app.models import Instance, InstanceStatusChange
from tests.factories import T0

pytestmark = [pytest.mark.django_db, pytest.mark.both_entry_points]


def test_it_answers_ok_for_a_known_instance(register_instance, instance_heartbeat, frozen):
    register_instance("i-1")
    response = instance_heartbeat("i-1")
    assert response.status_code == 200
    assert response.json() == {"ok": True}


def test_it_answers_unknown_instance_with_200_for_compat(instance_heartbeat, frozen):
    response = instance_heartbeat("i-nobody", inflight=1)
    assert response.status_code == 200
    assert response.json() == {"ok": False, "error": "unknown_instance"}
    assert not Instance.objects.exists()


def test_it_refreshes_last_seen(register_instance, instance_heartbeat, frozen):
    register_instance("i-1")
    frozen.shift(7.5)
    instance_heartbeat("i-1")
    instance = Instance.objects.get(pk="i-1")
    assert instance.last_seen_at == T0 + 7.5
    assert instance.registered_at == T0


def test_it_stores_the_load(register_instance, instance_heartbeat, frozen, listed_instances):
    register_instance("i-1")
    instance_heartbeat("i-1", inflight=4, qps_1m=2.5, gpu_util=88.0)
    assert listed_instances()["i-1"]["load"] == {"inflight": 4, "qps_1m": 2.5, "gpu_util": 88.0}


def test_it_changes_only_the_load_fields_it_is_sent(register_instance, instance_heartbeat, frozen, listed_instances):
    register_instance("i-1")
    instance_heartbeat("i-1", inflight=4, qps_1m=2.5, gpu_util=88.0)
    instance_heartbeat("i-1", inflight=0)
    assert listed_instances()["i-1"]["load"] == {"inflight": 0, "qps_1m": 2.5, "gpu_util": 88.0}


def test_it_keeps_the_load_on_a_bare_heartbeat(register_instance, instance_heartbeat, frozen, listed_instances):
    register_instance("i-1")
    instance_heartbeat("i-1", inflight=4)
    instance_heartbeat("i-1")
    assert listed_instances()["i-1"]["load"]["inflight"] == 4


@pytest.mark.parametrize(("field", "value"), [("inflight", 0), ("qps_1m", 0.0), ("gpu_util", 0.0), ("gpu_util", 100.0)])
def test_it_accepts_the_edges_of_each_range(register_instance, instance_heartbeat, frozen, listed_instances, field, value):
    register_instance("i-1")
    assert instance_heartbeat("i-1", **{field: value}).json() == {"ok": True}
    assert listed_instances()["i-1"]["load"][field] == value


def test_it_accepts_numeric_strings_for_rates(register_instance, instance_heartbeat, frozen, listed_instances):
    register_instance("i-1")
    assert instance_heartbeat("i-1", qps_1m="3.5", gpu_util="12").json() == {"ok": True}
    assert listed_instances()["i-1"]["load"]["qps_1m"] == 3.5
    assert listed_instances()["i-1"]["load"]["gpu_util"] == 12.0


def test_it_records_nothing_for_an_ordinary_heartbeat(register_instance, instance_heartbeat, frozen):
    register_instance("i-1")
    instance_heartbeat("i-1")
    assert InstanceStatusChange.objects.filter(instance_id="i-1").count() == 1


def test_it_refreshes_an_alive_instance_in_one_statement(register_instance, frozen, django_assert_num_queries):
    register_instance("i-1")
    with django_assert_num_queries(1):
        assert Instance.objects.heartbeat("i-1", T0 + 5, {"inflight": 3, "qps_1m": 1.5}) == (Heartbeat.OK, None)


def test_it_revives_a_stale_instance(register_instance, instance_heartbeat, frozen, listed_instances):
    register_instance("i-1")
    frozen.shift(40)
    Instance.objects.sweep(T0 + 40)
    assert listed_instances(include_dead="true")["i-1"]["status"] == "stale"
    assert instance_heartbeat("i-1").json() == {"ok": True}
    row = listed_instances()["i-1"]
    assert row["is_alive"] is True
    assert row["status"] == "alive"
    latest = InstanceStatusChange.objects.filter(instance_id="i-1").first()
    assert (latest.old_status, latest.new_status, latest.reason, latest.at) == ("stale", "alive", "heartbeat", T0 + 40)


def test_it_does_not_bring_back_an_unregistered_instance(api, register_instance, instance_heartbeat, frozen):
    register_instance("i-1")
    api.post("/v1/instance/unregister", {"instance_id": "i-1"})
    assert instance_heartbeat("i-1").json() == {"ok": False, "error": "unknown_instance"}
    assert not Instance.objects.exists()


def test_it_ignores_unknown_fields(register_instance, instance_heartbeat, frozen):
    register_instance("i-1")
    assert instance_heartbeat("i-1", future_field={"x": 1}).json() == {"ok": True}

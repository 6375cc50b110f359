"""Periodic tasks: declared by each role's app, registered idempotently, each runnable by hand as a command."""

import io

import pytest
from django.core.management import call_command
from django_q.models import Schedule

from controlplane.endpoints.liveness import Status
from controlplane.ops.tasks import ensure_schedules, periodic_tasks
from proxy_app.models import Instance, InstanceStatusChange, PoolResourceMinute
from scheduler_app.models import PoolResourceSample, Proxy, ProxyPoolMinute, ProxyStatusChange
from tests.factories import T0

pytestmark = pytest.mark.django_db


def run(command):
    out = io.StringIO()
    call_command(command, stdout=out)
    return out.getvalue().strip()


ALL_ROLES = ["proxy", "scheduler"]


def test_it_collects_the_tasks_each_role_app_declares():
    proxy = {task.func for task in periodic_tasks(["proxy"])}
    scheduler = {task.func for task in periodic_tasks(["scheduler"])}
    assert "proxy_app.tasks.sweep_instances" in proxy
    assert "scheduler_app.tasks.sweep_proxies" in scheduler
    assert all(func.startswith("proxy_app.") for func in proxy)
    assert all(func.startswith("scheduler_app.") for func in scheduler)


def test_it_registers_each_schedule_once_however_often_it_runs():
    ensure_schedules(ALL_ROLES)
    ensure_schedules(ALL_ROLES)
    assert Schedule.objects.count() == len(periodic_tasks(ALL_ROLES))
    assert set(Schedule.objects.values_list("func", flat=True)) == {t.func for t in periodic_tasks(ALL_ROLES)}


def test_it_keeps_only_the_schedules_of_the_roles_it_runs():
    ensure_schedules(ALL_ROLES)
    ensure_schedules(["scheduler"])
    assert set(Schedule.objects.values_list("func", flat=True)) == {t.func for t in periodic_tasks(["scheduler"])}


def test_it_schedules_only_functions_that_exist():
    from django.utils.module_loading import import_string

    for task in periodic_tasks(ALL_ROLES):
        assert callable(import_string(task.func))


def register_instance(instance_id="i-1"):
    Instance.objects.register(instance_id=instance_id, host="h", port=1, endpoints=[], tags=[], weight=1.0,
                              meta={}, capabilities=None, now=T0)


def test_it_records_each_instance_transition_once_with_sweep_instances(frozen):
    register_instance()
    frozen.shift(20)  # past the alive window (15 s), within the TTL (30 s)
    assert run("sweep_instances") == "sweep_instances: 1"
    assert run("sweep_instances") == "sweep_instances: 0"
    frozen.shift(20)
    assert run("sweep_instances") == "sweep_instances: 1"
    assert list(InstanceStatusChange.objects.filter(instance_id="i-1").order_by("at", "id")
                .values_list("old_status", "new_status")) == [
        ("", Status.ALIVE), (Status.ALIVE, Status.SUSPECT), (Status.SUSPECT, Status.STALE)]


def test_it_waits_for_the_retention_in_delete_expired_instances(frozen, settings):
    settings.FLEETWATCH_RETENTION_S = 3600
    register_instance()
    frozen.shift(3599)
    assert run("delete_expired_instances") == "delete_expired_instances: 0"
    frozen.shift(2)
    assert run("delete_expired_instances") == "delete_expired_instances: 1"
    assert not Instance.objects.exists()
    assert InstanceStatusChange.objects.filter(instance_id="i-1", new_status="expired").exists()


def test_it_drops_old_status_changes_in_prune_instance_history(frozen, settings):
    settings.FLEETWATCH_STATUS_HISTORY_S = 100
    register_instance()
    frozen.shift(101)
    assert run("prune_instance_history") == "prune_instance_history: 1"
    assert not InstanceStatusChange.objects.exists()


def register_proxy(api, **fields):
    response = api.post("/v1/proxy/register", {"proxy_id": "pxy-a", "host": "10.0.0.1", "port": 8002, **fields})
    assert response.status_code == 200


def test_it_sweeps_and_expires_proxies(api, frozen, settings):
    settings.FLEETWATCH_RETENTION_S = 3600
    register_proxy(api)
    frozen.shift(31)
    assert run("sweep_proxies") == "sweep_proxies: 1"
    assert Proxy.objects.get(pk="pxy-a").status == Status.STALE
    frozen.shift(3600)
    assert run("delete_expired_proxies") == "delete_expired_proxies: 1"
    assert ProxyStatusChange.objects.filter(proxy_id="pxy-a", new_status="expired").exists()


def test_it_keeps_the_window_in_prune_pool_history(api, frozen, settings):
    settings.FLEETWATCH_HISTORY_FULL_S = 3600
    settings.FLEETWATCH_STATUS_HISTORY_S = 7200
    register_proxy(api, pool_resource={"schema_version": 1, "instances": {"alive": 1}})
    frozen.shift(3601)
    api.post("/v1/proxy/heartbeat", {"proxy_id": "pxy-a", "pool_resource": {"schema_version": 1}})
    assert run("prune_pool_history") == "prune_pool_history: 1"  # the first sample only
    assert PoolResourceSample.objects.count() == 1


def test_it_folds_minutes_with_rollup_pool_history(api, frozen):
    register_proxy(api, pool_resource={"schema_version": 1, "utilization": {"cpu_avg": 20.0}})
    frozen.shift(30)
    api.post("/v1/proxy/heartbeat", {"proxy_id": "pxy-a", "pool_resource": {"utilization": {"cpu_avg": 40.0}}})
    frozen.shift(40)
    assert run("rollup_pool_history") == "rollup_pool_history: 1"
    assert run("rollup_pool_history") == "rollup_pool_history: 0"
    assert ProxyPoolMinute.objects.get().cpu_avg_avg == 30.0


def test_it_folds_minutes_with_rollup_instance_history(frozen):
    from proxy_app.ops.history import record

    register_instance()
    record()
    frozen.shift(70)
    # One minute of the instance series (no snapshot: nothing) and one of the pool series.
    assert run("rollup_instance_history") == "rollup_instance_history: 1"
    assert PoolResourceMinute.objects.get().alive_avg == 1.0

"""Admin pages of the proxy's models: read-only, human times, deletes through unregister."""

import pytest

from proxy_app.models import (
    Instance,
    InstanceMinute,
    InstanceSample,
    InstanceStatusChange,
    PoolResource,
    PoolResourceMinute,
)
from tests.admin_rows import change_list_rows, rows_by_id
from tests.factories import T0, make_gpu, make_snapshot

pytestmark = pytest.mark.django_db

INSTANCES = "/admin/proxy_app/instance/"


@pytest.fixture
def pool(register_instance, report, frozen):
    """gpu-1 reporting (cpu 42 %, GPU 63 %, degraded), cpu-1 without a snapshot, old-1 stale."""
    register_instance("old-1", host="10.9.9.9")
    frozen.shift(100)
    register_instance("gpu-1", host="10.0.0.1")
    report("gpu-1", snapshot=make_snapshot(cpu=42.0, gpus=[make_gpu(avg=63.0)], admission="degraded"))
    register_instance("cpu-1", host="10.0.0.2")
    frozen.shift(3)


def test_it_lists_instances_with_status_last_seen_and_resources(admin_client, pool):
    rows = rows_by_id(admin_client.get(INSTANCES), "Instance id")

    assert rows["gpu-1"] == {
        "Instance id": "gpu-1", "Address": "10.0.0.1:8000", "Status (now)": "alive", "Last seen": "3 s ago",
        "CPU": "42.0 %", "GPU util": "63.0 %", "Admission": "degraded", "Fenced": "–", "Weight": "1.0",
    }
    assert rows["cpu-1"]["CPU"] == rows["cpu-1"]["Admission"] == "–"
    # Computed now from last_seen_at, though no sweep ran.
    assert rows["old-1"]["Status (now)"] == "stale"
    assert rows["old-1"]["Last seen"] == "103 s ago"


@pytest.mark.parametrize(
    "query, shown",
    [
        ("resource__admission_state=degraded", {"gpu-1"}),
        ("q=10.9.9", {"old-1"}),
        ("q=cpu-", {"cpu-1"}),
    ],
)
def test_it_filters_and_searches_instances(admin_client, pool, query, shown):
    rows = change_list_rows(admin_client.get(f"{INSTANCES}?{query}"))
    assert {row["Instance id"] for row in rows} == shown


def test_its_instance_list_costs_the_same_queries_for_more_instances(admin_client, pool, register_instance,
                                                                     django_assert_max_num_queries):
    admin_client.get(INSTANCES)  # warm the session and content types
    for n in range(20):
        register_instance(f"more-{n}", port=9000 + n)
    with django_assert_max_num_queries(12):
        assert admin_client.get(INSTANCES).status_code == 200


def test_its_instance_page_shows_the_latest_snapshot_and_human_times_read_only(admin_client, pool):
    response = admin_client.get(f"{INSTANCES}gpu-1/change/")
    page = response.content.decode()

    assert response.status_code == 200
    assert "resource_snapshot_v1" in page and "gpu-host-1" in page
    assert "2026-01-01 00:01:40 UTC (3 s ago)" in page  # registered and last seen, not epoch seconds
    assert "1767225700" not in page
    # Nothing to edit: no form inputs for status, port or weight, no Save button.
    for field in ("status", "port", "weight", "host"):
        assert f'name="{field}"' not in page
    assert 'type="submit" value="Save"' not in page


def test_it_has_no_add_button_instances_come_from_agents(admin_client, pool):
    assert admin_client.get(f"{INSTANCES}add/").status_code == 403
    assert f'href="{INSTANCES}add/"' not in admin_client.get(INSTANCES).content.decode()


def test_it_unregisters_an_instance_deleted_there_with_a_recorded_change(admin_client, pool):
    response = admin_client.post(f"{INSTANCES}cpu-1/delete/", {"post": "yes"})

    assert response.status_code == 302
    assert not Instance.objects.filter(pk="cpu-1").exists()
    last = InstanceStatusChange.objects.filter(instance_id="cpu-1").order_by("-at", "-id").first()
    assert (last.old_status, last.new_status, last.reason) == ("alive", "unregistered", "unregistered")


def test_its_bulk_delete_records_each_instance_leaving(admin_client, pool):
    response = admin_client.post(
        INSTANCES, {"action": "delete_selected", "_selected_action": ["gpu-1", "old-1"], "post": "yes"}
    )

    assert response.status_code == 302
    assert list(Instance.objects.values_list("pk", flat=True)) == ["cpu-1"]
    left = InstanceStatusChange.objects.filter(new_status="unregistered").values_list("instance_id", flat=True)
    assert sorted(left) == ["gpu-1", "old-1"]


def test_it_lists_resources_and_status_changes(admin_client, pool):
    resources = change_list_rows(admin_client.get("/admin/proxy_app/instanceresource/"))
    assert [row["Instance"] for row in resources] == ["gpu-1"]
    assert resources[0]["Reported"] == "3 s ago"
    history = change_list_rows(admin_client.get("/admin/proxy_app/instancestatuschange/"))
    assert {(row["Instance id"], row["New status"], row["Reason"]) for row in history} == {
        ("old-1", "alive", "registered"), ("gpu-1", "alive", "registered"), ("cpu-1", "alive", "registered"),
    }
    assert {row["At"] for row in history if row["Instance id"] == "cpu-1"} == {"2026-01-01 00:01:40 UTC (3 s ago)"}


def test_its_status_history_is_searchable_by_instance(admin_client, pool):
    rows = change_list_rows(admin_client.get("/admin/proxy_app/instancestatuschange/?q=gpu-1"))
    assert {row["Instance id"] for row in rows} == {"gpu-1"}


def test_its_resource_page_shows_agent_times_as_dates(admin_client, pool):
    page = admin_client.get("/admin/proxy_app/instanceresource/gpu-1/change/").content.decode()
    assert "2026-01-01 00:00:00 UTC" in page  # the snapshot's timestamp_ms
    assert "1767225600000" not in page.replace("&quot;timestamp_ms&quot;: 1767225600000", "")


@pytest.fixture
def series(pool, frozen):
    """Two recorder ticks a minute apart, folded."""
    from proxy_app.ops.history import INSTANCES, POOL, record

    record()
    frozen.shift(90)
    record()
    INSTANCES.fold(T0 + 400)
    POOL.fold(T0 + 400)


@pytest.mark.parametrize("model", [InstanceSample, InstanceMinute, PoolResource, PoolResourceMinute])
def test_it_shows_the_series_read_only(admin_client, series, model):
    base = f"/admin/proxy_app/{model._meta.model_name}/"
    rows = change_list_rows(admin_client.get(base))
    assert rows
    assert admin_client.get(f"{base}add/").status_code == 403
    detail = admin_client.get(f"{base}{model.objects.first().pk}/change/")
    assert detail.status_code == 200 and b'type="submit" value="Save"' not in detail.content


def test_it_browses_rollups_by_date(admin_client, series):
    page = admin_client.get("/admin/proxy_app/poolresourceminute/").content.decode()
    assert '<nav class="toplinks">' in page
    rows = change_list_rows(admin_client.get("/admin/proxy_app/poolresourceminute/?minute__day=1&minute__month=1&minute__year=2026"))
    assert len(rows) == 2


def test_it_filters_full_resolution_rows_by_age(admin_client, series):
    rows = change_list_rows(admin_client.get("/admin/proxy_app/poolresource/?within=60"))
    assert [row["At"] for row in rows] == ["2026-01-01 00:03:13 UTC (0 s ago)"]
    assert len(change_list_rows(admin_client.get("/admin/proxy_app/poolresource/"))) == 2


def test_it_shows_each_engine_s_indexed_blocks(admin_client, api, pool):
    api.post("/v1/instance/prefix_blocks", {"instance_id": "gpu-1", "engine": "http://127.0.0.1:8001", "epoch": 3,
                                            "seq": 0, "block_tokens": 16, "reset": True, "added": [1, 2, 3]})
    response = admin_client.get("/admin/proxy_app/prefixengine/")
    assert response.status_code == 200
    [row] = change_list_rows(response)
    assert (row["Instance"], row["Engine"], row["Blocks"], row["Epoch"], row["Seq"]) == (
        "gpu-1", "http://127.0.0.1:8001", "3", "3", "0")

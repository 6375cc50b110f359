"""Admin pages of the proxy's models."""

import pytest

from tests.conftest import make_gpu, make_snapshot

pytestmark = pytest.mark.django_db

INSTANCES = "/admin/proxy_app/instance/"


@pytest.fixture
def pool(register, report, frozen):
    """gpu-1 reporting (cpu 42 %, GPU 63 %, degraded), cpu-1 without a snapshot, old-1 stale."""
    register("old-1", host="10.9.9.9")
    frozen.shift(100)
    register("gpu-1", host="10.0.0.1")
    report("gpu-1", snapshot=make_snapshot(cpu=42.0, gpus=[make_gpu(avg=63.0)], admission="degraded"))
    register("cpu-1", host="10.0.0.2")
    frozen.shift(3)


def test_the_instance_list_shows_status_last_seen_and_resources(admin_client, pool):
    page = admin_client.get(INSTANCES).content.decode()

    assert "10.0.0.1:8000" in page
    assert "3 s ago" in page
    assert "42.0 %" in page
    assert "63.0 %" in page
    assert "degraded" in page
    assert "stale" in page  # old-1, computed now even though no sweep ran


@pytest.mark.parametrize(
    "query, shown, hidden",
    [
        ("resource__admission_state=degraded", {"gpu-1"}, {"cpu-1", "old-1"}),
        ("q=10.9.9", {"old-1"}, {"gpu-1", "cpu-1"}),
        ("q=cpu-", {"cpu-1"}, {"gpu-1", "old-1"}),
    ],
)
def test_the_instance_list_filters_and_searches(admin_client, pool, query, shown, hidden):
    page = admin_client.get(f"{INSTANCES}?{query}").content.decode()

    assert all(f">{instance_id}<" in page for instance_id in shown)
    assert not any(f">{instance_id}<" in page for instance_id in hidden)


def test_the_instance_list_costs_the_same_queries_for_more_instances(admin_client, pool, register,
                                                                      django_assert_max_num_queries):
    admin_client.get(INSTANCES)  # warm the session and content types
    for n in range(20):
        register(f"more-{n}", port=9000 + n)
    with django_assert_max_num_queries(12):
        assert admin_client.get(INSTANCES).status_code == 200


def test_the_instance_page_shows_the_latest_snapshot_read_only(admin_client, pool):
    page = admin_client.get(f"{INSTANCES}gpu-1/change/").content.decode()

    assert "resource_snapshot_v1" in page
    assert "gpu-host-1" in page


def test_the_resource_and_history_lists_render(admin_client, pool):
    assert admin_client.get("/admin/proxy_app/instanceresource/").status_code == 200
    history = admin_client.get("/admin/proxy_app/instancestatuschange/").content.decode()
    assert "registered" in history


def test_the_status_history_is_searchable_by_instance(admin_client, pool):
    page = admin_client.get("/admin/proxy_app/instancestatuschange/?q=gpu-1").content.decode()
    assert ">gpu-1<" in page
    assert ">old-1<" not in page

"""Admin pages of the scheduler's models."""

import pytest

from scheduler_app.models import PoolResourceSample, Proxy, ProxyStatusChange
from tests.admin_rows import change_list_rows, rows_by_id
from tests.factories import make_pool_resource

pytestmark = pytest.mark.django_db

PROXIES = "/admin/scheduler_app/proxy/"


@pytest.fixture
def fleet(register_proxy, proxy_heartbeat, frozen):
    """pxy-a accepting (2/3 instances, cpu 12.5 %), pxy-b degraded, pxy-c without a summary."""
    register_proxy("pxy-a", host="10.0.0.1", pool_resource=make_pool_resource(alive=2, total=3, cpu=12.5))
    register_proxy("pxy-b", host="10.0.0.2", pool_resource=make_pool_resource(admission="degraded"))
    register_proxy("pxy-c", host="10.9.9.9")
    frozen.shift(3)


def test_it_lists_proxies_with_liveness_and_the_summary_figures(admin_client, fleet):
    rows = rows_by_id(admin_client.get(PROXIES), "Proxy id")

    assert rows["pxy-a"] == {
        "Proxy id": "pxy-a", "Address": "10.0.0.1:8002", "Status (now)": "alive", "Last seen": "3 s ago",
        "Admission": "accepting", "Instances alive/total": "2/3", "CPU avg": "12.5 %", "GPU util avg": "50.0 %",
        "Weight": "1.0",
    }
    assert rows["pxy-b"]["Admission"] == "degraded"
    assert rows["pxy-c"]["Instances alive/total"] == "–/–"  # no summary yet
    assert rows["pxy-c"]["Admission"] == "–"


@pytest.mark.parametrize(
    "query, shown",
    [
        ("admission=degraded", {"pxy-b"}),
        ("admission=none", {"pxy-c"}),
        ("status__exact=alive", {"pxy-a", "pxy-b", "pxy-c"}),
        ("status__exact=stale", set()),
        ("q=10.9.9", {"pxy-c"}),
    ],
)
def test_it_filters_and_searches_proxies(admin_client, fleet, query, shown):
    rows = change_list_rows(admin_client.get(f"{PROXIES}?{query}"))
    assert {row["Proxy id"] for row in rows} == shown


def test_its_proxy_page_shows_the_summary_as_read_only_json_and_human_times(admin_client, fleet):
    response = admin_client.get(f"{PROXIES}pxy-a/change/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "&quot;pool_admission_state&quot;: &quot;accepting&quot;" in page
    assert 'name="pool_resource"' not in page
    assert "2026-01-01 00:00:00 UTC (3 s ago)" in page
    assert '<div class="readonly">1767225600.0</div>' not in page


def test_it_lets_no_one_add_or_edit_proxies_but_deletes_them_through_unregister(admin_client, fleet):
    assert admin_client.get(f"{PROXIES}add/").status_code == 403
    assert b'type="submit" value="Save"' not in admin_client.get(f"{PROXIES}pxy-a/change/").content

    response = admin_client.post(f"{PROXIES}pxy-c/delete/", {"post": "yes"})

    assert response.status_code == 302
    assert not Proxy.objects.filter(pk="pxy-c").exists()
    assert ProxyStatusChange.objects.filter(proxy_id="pxy-c", new_status="unregistered").exists()


def test_its_bulk_delete_records_each_proxy_leaving(admin_client, fleet):
    response = admin_client.post(
        PROXIES, {"action": "delete_selected", "_selected_action": ["pxy-a", "pxy-b"], "post": "yes"}
    )

    assert response.status_code == 302
    assert list(Proxy.objects.values_list("pk", flat=True)) == ["pxy-c"]
    left = ProxyStatusChange.objects.filter(new_status="unregistered").values_list("proxy_id", flat=True)
    assert sorted(left) == ["pxy-a", "pxy-b"]


@pytest.mark.parametrize("model", [PoolResourceSample, ProxyStatusChange])
def test_its_history_lists_render_read_only(admin_client, fleet, model):
    base = f"/admin/scheduler_app/{model._meta.model_name}/"
    row = model.objects.filter(proxy_id="pxy-a").first()

    assert admin_client.get(base).status_code == 200
    assert admin_client.get(f"{base}add/").status_code == 403
    detail = admin_client.get(f"{base}{row.pk}/change/")
    assert detail.status_code == 200
    assert b'type="submit" value="Save"' not in detail.content

"""Admin pages of the scheduler's models."""

import pytest

from scheduler_app.models import PoolResourceSample, Proxy, ProxyStatusChange
from tests.scheduler.conftest import make_pool_resource

pytestmark = pytest.mark.django_db

PROXIES = "/admin/scheduler_app/proxy/"


@pytest.fixture
def fleet(register_proxy, heartbeat, frozen):
    """pxy-a accepting (2/3 instances, cpu 12.5 %), pxy-b degraded, pxy-c without a summary."""
    register_proxy("pxy-a", host="10.0.0.1", pool_resource=make_pool_resource(alive=2, total=3, cpu=12.5))
    register_proxy("pxy-b", host="10.0.0.2", pool_resource=make_pool_resource(admission="degraded"))
    register_proxy("pxy-c", host="10.9.9.9")
    frozen.shift(3)


def test_the_proxy_list_shows_liveness_and_the_summary_figures(admin_client, fleet):
    page = admin_client.get(PROXIES).content.decode()

    assert "10.0.0.1:8002" in page
    assert "3 s ago" in page
    assert "2/3" in page
    assert "12.5 %" in page
    assert "degraded" in page
    assert "–/–" in page  # pxy-c has no summary yet


@pytest.mark.parametrize(
    "query, shown, hidden",
    [
        ("admission=degraded", {"pxy-b"}, {"pxy-a", "pxy-c"}),
        ("admission=none", {"pxy-c"}, {"pxy-a", "pxy-b"}),
        ("status__exact=alive", {"pxy-a", "pxy-b", "pxy-c"}, set()),
        ("q=10.9.9", {"pxy-c"}, {"pxy-a", "pxy-b"}),
    ],
)
def test_the_proxy_list_filters_and_searches(admin_client, fleet, query, shown, hidden):
    page = admin_client.get(f"{PROXIES}?{query}").content.decode()

    assert all(f">{proxy_id}<" in page for proxy_id in shown)
    assert not any(f">{proxy_id}<" in page for proxy_id in hidden)


def test_the_proxy_page_shows_the_summary_as_read_only_json(admin_client, fleet):
    response = admin_client.get(f"{PROXIES}pxy-a/change/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "&quot;pool_admission_state&quot;: &quot;accepting&quot;" in page
    assert 'name="pool_resource"' not in page


def test_proxies_cannot_be_added_or_edited_by_hand_but_can_be_deleted(admin_client, fleet):
    assert admin_client.get(f"{PROXIES}add/").status_code == 403
    assert b'type="submit" value="Save"' not in admin_client.get(f"{PROXIES}pxy-a/change/").content

    response = admin_client.post(f"{PROXIES}pxy-c/delete/", {"post": "yes"})

    assert response.status_code == 302
    assert not Proxy.objects.filter(pk="pxy-c").exists()
    assert ProxyStatusChange.objects.filter(proxy_id="pxy-c", new_status="unregistered").exists()


def test_the_bulk_delete_action_records_each_proxy_leaving(admin_client, fleet):
    response = admin_client.post(
        PROXIES, {"action": "delete_selected", "_selected_action": ["pxy-a", "pxy-b"], "post": "yes"}
    )

    assert response.status_code == 302
    assert list(Proxy.objects.values_list("pk", flat=True)) == ["pxy-c"]
    left = ProxyStatusChange.objects.filter(new_status="unregistered").values_list("proxy_id", flat=True)
    assert sorted(left) == ["pxy-a", "pxy-b"]


@pytest.mark.parametrize("model", [PoolResourceSample, ProxyStatusChange])
def test_history_lists_render_and_are_read_only(admin_client, fleet, model):
    base = f"/admin/scheduler_app/{model._meta.model_name}/"
    row = model.objects.filter(proxy_id="pxy-a").first()

    assert admin_client.get(base).status_code == 200
    assert admin_client.get(f"{base}add/").status_code == 403
    detail = admin_client.get(f"{base}{row.pk}/change/")
    assert detail.status_code == 200
    assert b'type="submit" value="Save"' not in detail.content

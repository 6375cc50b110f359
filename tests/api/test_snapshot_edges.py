"""Snapshot values that broke the stored columns, found by the normaliser's property tests
(``tests/proxy/test_normalise_properties.py``) and kept here end to end, on both databases."""

import pytest

from proxy_app.models import InstanceResource

pytestmark = [pytest.mark.django_db, pytest.mark.both_entry_points]


@pytest.fixture
def quiet_instance(api, frozen):
    """An instance past its TTL: its next snapshot takes the slower path that revives it."""
    response = api.post("/v1/instance/register", {"instance_id": "i-1", "host": "10.0.0.1", "port": 8000})
    assert response.status_code == 200, response.content
    frozen.shift(31)
    return "i-1"


def snapshot(api, instance_id, body):
    return api.post("/v1/instance/resource_snapshot", {"instance_id": instance_id, "snapshot": body})


def test_it_stores_an_admission_state_that_lengthens_when_lower_cased(api, quiet_instance):
    # "İ".lower() is two characters: cut before lowering, 32 of them overflowed the
    # 32-character column (a 500 on PostgreSQL, a too-long value on SQLite).
    response = snapshot(api, quiet_instance, {"capacity_hint": {"admission_state": "İ" * 32}})
    assert response.status_code == 200, response.content
    assert response.json() == {"ok": True}
    stored = InstanceResource.objects.get(pk=quiet_instance).admission_state
    assert stored == "İ".lower() * 16


def test_it_answers_a_free_ratio_over_a_vanishing_total_as_null(api, quiet_instance):
    # free / total overflowed to inf, which a float column stores but JSON cannot say.
    memory = {"free_mb": 1e15, "total_mb": 5e-324, "used_mb": 0.0}
    assert snapshot(api, quiet_instance, {"devices": {"memory": memory}}).json() == {"ok": True}
    row = api.get("/v1/instance/list").json()[0]
    assert row["resource"]["memory_free_ratio"] is None
    assert InstanceResource.objects.get(pk=quiet_instance).memory_free_ratio is None

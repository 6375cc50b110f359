"""Feedback with the engine's cached tokens (SPEC 16.4): counted per instance and shown as /metrics counters (the
pool page's ratio: tests/pages/test_cache_audit.py)."""

import pytest

from proxy_app.models import Instance
from tests.proxy.test_metrics import scrape, value

pytestmark = pytest.mark.django_db


def feedback(api, instance_id, **fields):
    return api.post("/v1/placement/feedback", {"instance_id": instance_id, "outcome": "ok", **fields})


def totals(instance_id):
    return Instance.objects.filter(pk=instance_id).values_list("cached_tokens_total",
                                                               "predicted_cached_tokens_total").get()


def test_each_report_adds_to_the_instance_s_totals_and_both_counters(api, register_instance):
    register_instance("a")
    register_instance("b", host="10.0.0.2")
    for cached, predicted in ((640, 640), (0, 128), (256, 256)):
        assert feedback(api, "a", cached_tokens=cached, predicted_cached_tokens=predicted).json() == \
            {"ok": True, "fenced": False}
    assert feedback(api, "b").json() == {"ok": True, "fenced": False}  # nothing sent: nothing counted
    assert totals("a") == (896, 1024) and totals("b") == (0, 0)
    samples = scrape(api)
    assert value(samples, "fleetwatch_placement_cached_tokens_total", instance_id="a") == 896
    assert value(samples, "fleetwatch_placement_predicted_cached_tokens_total", instance_id="a") == 1024
    assert not [labels for name, labels in samples if name.startswith("fleetwatch_placement_")
                and dict(labels).get("instance_id") == "b"]


@pytest.mark.parametrize("fields", [{"cached_tokens": -1}, {"predicted_cached_tokens": 1.5},
                                    {"cached_tokens": True}, {"cached_tokens": [1]}])
def test_a_bad_figure_is_400_and_counts_nothing(api, register_instance, fields):
    register_instance("a")
    answer = feedback(api, "a", **fields)
    assert answer.status_code == 400 and answer.json()["error"] == "validation_error"
    assert totals("a") == (0, 0)


def test_an_unknown_instance_counts_nothing(api):
    assert feedback(api, "nobody", cached_tokens=5).json() == {"ok": False, "error": "unknown_instance"}

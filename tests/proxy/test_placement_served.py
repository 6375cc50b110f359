"""Placement by what the engines serve (SPEC 16.1): served ids are models, served adapters place as parent + adapter."""

import pytest

from proxy_app.placement.candidates import BOARD
from tests.factories import T0_MS, make_engine, make_snapshot

pytestmark = [pytest.mark.django_db, pytest.mark.both_entry_points]

TINY = {"id": "tiny", "root": "/models/tiny", "parent": None}
SQL_LORA = {"id": "sql-lora", "root": "/adapters/sql", "parent": "tiny"}


@pytest.fixture
def serving(register_instance, report, frozen):
    """``serving("a", served=[...])``: an instance whose one ok engine serves that list."""

    def _serving(instance_id, served, host="10.0.0.1", model="tiny"):
        register_instance(instance_id, host=host, port=8000)
        engine = make_engine(model=model, served=served, requests_waiting=0, scraped_at_ms=T0_MS)
        response = report(instance_id, make_snapshot(engines=[engine]))
        assert response.status_code == 200, response.content

    return _serving


def placed(api, **body):
    response = api.post("/v1/placement", body)
    return response.status_code, [c["instance_id"] for c in response.json()["candidates"]]


def test_an_adapter_id_as_the_model_places_only_on_the_instance_serving_it(api, serving):
    serving("with-lora", [TINY, SQL_LORA], host="10.0.0.1")
    serving("base-only", [TINY], host="10.0.0.2")
    assert placed(api, model="sql-lora") == (200, ["with-lora"])
    assert sorted(placed(api, model="tiny")[1]) == ["base-only", "with-lora"]


def test_an_adapter_given_explicitly_is_kept_as_sent(api, serving):
    serving("with-lora", [TINY, SQL_LORA])
    assert placed(api, model="tiny", adapter="sql-lora") == (200, ["with-lora"])
    assert placed(api, model="tiny", adapter="other-lora")[0] == 503


def test_a_served_base_id_is_a_model_the_instance_serves(api, serving):
    serving("a", [{"id": "served-name", "root": "/models/x", "parent": None}], model=None)
    assert placed(api, model="served-name") == (200, ["a"])


def test_parent_of_names_the_base_of_a_served_adapter_and_nothing_else(api, serving):
    serving("with-lora", [TINY, SQL_LORA])
    assert BOARD.parent_of("sql-lora") == "tiny"
    assert BOARD.parent_of("tiny") is None
    assert BOARD.parent_of("unknown") is None


def test_an_instance_that_stops_serving_the_adapter_no_longer_names_its_parent(api, serving, report):
    serving("with-lora", [TINY, SQL_LORA])
    assert BOARD.parent_of("sql-lora") == "tiny"
    report("with-lora", make_snapshot(engines=[make_engine(served=[TINY], scraped_at_ms=T0_MS)]), seq=2)
    BOARD.reset()
    assert BOARD.parent_of("sql-lora") is None

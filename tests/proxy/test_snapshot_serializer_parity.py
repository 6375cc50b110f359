"""The ingest hot path's compiled check (``SNAPSHOT_BODY``, ``BodyChecks``) against its declared twin (``openapi.bodies.Snapshot``).

The twin is what the schema publishes and what DRF's own
serializer would check; the compiled one must refuse and accept the very
same bodies with the very same messages. No database.
"""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rest_framework import serializers

from controlplane.api.errors import flatten_detail
from proxy_app.api.openapi.bodies import Snapshot
from proxy_app.api.reports import SNAPSHOT_BODY
from tests.factories import make_snapshot
from tests.strategies import json_values


def hot(body):
    """What the hot path makes of ``body``: its data, or its errors as the API answers them (the envelope's)."""
    try:
        return "valid", dict(SNAPSHOT_BODY(body))
    except serializers.ValidationError as error:
        return "invalid", flatten_detail(error.detail)


def declared(body):
    twin = Snapshot(data=body)
    if twin.is_valid():
        return "valid", dict(twin.validated_data)
    return "invalid", flatten_detail(twin.errors)


EDGES = [
    None, [], [{"instance_id": "i-1"}], "i-1", 7, True, {},
    {"instance_id": "i-1"},
    {"snapshot": {}},
    {"instance_id": "i-1", "snapshot": {}},
    {"instance_id": "i\x00-1", "snapshot": {}}, {"instance_id": "\x00"},
    {"instance_id": "  i-1  ", "snapshot": make_snapshot(), "metadata": {"report_seq": 3}},
    {"instance_id": "i-1", "snapshot": {}, "metadata": None},
    {"instance_id": "i-1", "snapshot": {}, "metadata": []},
    {"instance_id": "i-1", "snapshot": {}, "metadata": "seq=3"},
    {"instance_id": "i-1", "snapshot": None},
    {"instance_id": "i-1", "snapshot": [make_snapshot()]},
    {"instance_id": "i-1", "snapshot": "cpu=1"},
    {"instance_id": "i-1", "snapshot": 1.5},
    {"instance_id": None, "snapshot": {}},
    {"instance_id": 7, "snapshot": {}},
    {"instance_id": True, "snapshot": {}},
    {"instance_id": ["i-1"], "snapshot": {}},
    {"instance_id": "", "snapshot": {}},
    {"instance_id": " \t ", "snapshot": {}},
    {"instance_id": "i" * 255, "snapshot": {}},
    {"instance_id": "i" * 256, "snapshot": {}},
    {"instance_id": f" {'i' * 255} ", "snapshot": {}},
    {"instance_id": "", "snapshot": None, "metadata": 3},
    {"instance_id": "i-1", "snapshot": {}, "extra": {"ignored": True}},
]


@pytest.mark.parametrize("body", EDGES)
def test_it_answers_every_edge_as_the_declared_serializer_does(body):
    assert hot(body) == declared(body)


ids = st.none() | st.integers() | st.text(max_size=300) | st.sampled_from(["i-1", " i-1 ", "", "  ", "i" * 256])
bodies = st.fixed_dictionaries({}, optional={"instance_id": ids, "snapshot": json_values, "metadata": json_values})


@given(st.one_of(bodies, json_values))
def test_it_answers_any_json_body_as_the_declared_serializer_does(body):
    assert hot(body) == declared(body)


def test_it_keeps_the_snapshot_as_sent():
    snapshot = make_snapshot(cpu=math.pi)
    state, data = hot({"instance_id": "i-1", "snapshot": snapshot})
    assert state == "valid" and data["snapshot"] is snapshot and data["metadata"] == {}

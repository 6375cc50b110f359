"""The placement bodies' compiled checks (``PLACEMENT_BODY``, ``POOL_PLACEMENT_BODY``, ``BodyChecks``) against
their declared serializers, called as the placement views called them before (``to_internal_value``, then the
rules across fields of ``validate``).

The compiled check must accept the very same bodies into the very same data,
and refuse the others with the very same messages in the same order (the
envelope's bytes), a null body included. No database.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rest_framework import serializers

from controlplane.api.errors import flatten_detail
from proxy_app.api.serializers import MAX_TOKEN_ID, PLACEMENT_BODY, PlacementSerializer
from scheduler_app.serializers import POOL_PLACEMENT_BODY, PoolPlacementSerializer
from tests.strategies import json_values

INT64_MAX = 2**63 - 1


def answer(check, body):
    """``check(body)``'s data, or its errors as the API answers them (the envelope's)."""
    try:
        return "valid", sorted(check(body).items())
    except serializers.ValidationError as error:
        return "invalid", list(flatten_detail(error.detail).items())


def declared(serializer_class):
    def check(body):
        serializer = serializer_class()
        return serializer.validate(serializer.to_internal_value(body))
    return check


TEXTS = ["m", " m ", "", " ", "m" * 255, "m" * 256, "m\x00", "m\ud800", 7, 7.5, True, [], {}, ["m"]]
INTEGERS = [0, 1, -1, 3, 32, 33, 2**31, 2**63, 3.0, 3.5, True, "3", " 3 ", "x", "", [], {}]
PROMPTS = [
    [], [0], [1, 2, 3], [MAX_TOKEN_ID], [MAX_TOKEN_ID + 1], [-1], [INT64_MAX], [INT64_MAX + 1], [-(2**63)],
    [-(2**63) - 1], [True], [1, False], [1.0], [1.5], ["1"], [None], [[1]], list(range(5000)), "1 2 3", 7, {},
]
FIELDS = {"model": TEXTS, "adapter": TEXTS, "session_key": TEXTS, "prompt_tokens": INTEGERS,
          "max_tokens": INTEGERS, "count": INTEGERS, "exclude": [[], ["a"], ["a", "b"], [""], [7], ["a"] * 65, "a"],
          "prompt_token_ids": PROMPTS, "prompt_block_keys": PROMPTS}
EDGES = [
    None, [], [{}], "body", 7, True, 1.5, {},
    *[{"model": "m", field: value} for field, values in FIELDS.items() for value in values],
    *[{field: None} for field in FIELDS],
    {"prompt_token_ids": [1]}, {"prompt_block_keys": [1]}, {"model": None, "prompt_token_ids": [1]},
    {"model": "m", "prompt_token_ids": [1], "prompt_block_keys": [1]},
    {"prompt_token_ids": [1], "prompt_block_keys": [1]},
    {"model": "m", "prompt_token_ids": None, "prompt_block_keys": [1]},
    {"model": 7, "count": 0, "prompt_token_ids": [1], "prompt_block_keys": [1]},
    {"model": "m", "count": 2, "exclude": ["a"], "session_key": "s", "prompt_tokens": 10, "max_tokens": 5,
     "adapter": "lora", "prompt_token_ids": [1, 2]},
    {"model": "m", "surprise": True, "meta": {"zone": "eu"}},
]
CHECKS = [(PLACEMENT_BODY, PlacementSerializer), (POOL_PLACEMENT_BODY, PoolPlacementSerializer)]


@pytest.mark.parametrize("body", EDGES)
@pytest.mark.parametrize(("check", "serializer_class"), CHECKS, ids=["instance", "pool"])
def test_it_answers_every_edge_as_the_declared_serializer_did(check, serializer_class, body):
    assert answer(check, body) == answer(declared(serializer_class), body)


bodies = st.fixed_dictionaries({}, optional={
    field: st.sampled_from(values) | json_values for field, values in FIELDS.items()
})


@given(st.one_of(bodies, json_values))
def test_it_answers_any_json_body_as_the_declared_serializer_did(body):
    for check, serializer_class in CHECKS:
        assert answer(check, body) == answer(declared(serializer_class), body)


def test_a_null_body_is_refused_in_the_placement_views_own_words():
    assert answer(PLACEMENT_BODY, None) == ("invalid", [
        ("non_field_errors", ["Invalid data. Expected a dictionary, but got NoneType."])])

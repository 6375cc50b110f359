"""The heartbeat's compiled check (``HEARTBEAT_BODY``, ``BodyChecks``) against its declared twin (``openapi.bodies.InstanceHeartbeat``).

The twin is what the schema publishes and what a declared-field DRF
serializer checks; the compiled one must accept the very same bodies
into the very same data, and refuse the others with the very same messages
in the same order (the envelope's bytes). No database.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rest_framework import serializers

from controlplane.api.errors import flatten_detail
from controlplane.api.fields import MAX_INFLIGHT
from controlplane.figures import MAX_QUANTITY
from proxy_app.api.openapi.bodies import InstanceHeartbeat
from proxy_app.api.reports import HEARTBEAT_BODY
from tests.factories import make_capabilities
from tests.strategies import json_values

FINGERPRINT = "sha256:" + "0" * 64


def hot(body):
    """What the hot path makes of ``body``: its data, or its errors as the API answers them (the envelope's)."""
    try:
        return "valid", list(HEARTBEAT_BODY(body).items())
    except serializers.ValidationError as error:
        return "invalid", list(flatten_detail(error.detail).items())


def declared(body):
    twin = InstanceHeartbeat(data=body)
    if twin.is_valid():
        return "valid", list(twin.validated_data.items())
    return "invalid", list(flatten_detail(twin.errors).items())


def beat(**fields):
    return {"instance_id": "i-1", **fields}


NUMBERS = [
    0, 1, 3, -1, -0.0, 0.0, 1.5, 3.0, -2.5, 99.99, 100, 100.0, 100.5, 101, 1e15, 1e15 + 2, 10**15, 10**15 + 1,
    1e16, 2.5e-300, MAX_INFLIGHT, MAX_INFLIGHT + 1, 2**63, 2**64 - 1, 10**30, 10**400, 10**5000, 1e308,
    True, False, "3", " 3 ", "3.0", "3.00 ", "3.5", "-1", "1_000", "1e3", "nan", "inf", "-inf", "Infinity",
    "", " ", "abc", "0x10", "٣", "9" * 1000, "9" * 1001, [], [1], {}, {"value": 1},
]
EDGES = [
    None, [], [beat()], "i-1", 7, True, 1.5, {},
    beat(),
    {"inflight": 3},
    {"instance_id": None}, {"instance_id": 7}, {"instance_id": 7.5}, {"instance_id": True}, {"instance_id": ["i-1"]},
    {"instance_id": {"id": "i-1"}}, {"instance_id": ""}, {"instance_id": " \t "}, {"instance_id": "  i-1  "},
    {"instance_id": "i" * 255}, {"instance_id": "i" * 256}, {"instance_id": f" {'i' * 255} "},
    {"instance_id": "i\x00"}, {"instance_id": "i\ud800"}, {"instance_id": "i" * 256 + "\x00\udfff"},
    *[beat(**{field: value}) for field in ("inflight", "qps_1m", "gpu_util") for value in NUMBERS],
    beat(inflight=None, qps_1m=None, gpu_util=None),
    beat(inflight=-1, qps_1m="x", gpu_util=101),
    {"instance_id": "", "inflight": True, "capability_fingerprint": ""},
    beat(capabilities=None), beat(capabilities={}), beat(capabilities=make_capabilities()),
    beat(capabilities=[]), beat(capabilities="caps"), beat(capabilities=7),
    beat(capabilities={"model": 7}), beat(capabilities={"surprise": True}),
    beat(capabilities={"model": "m", "kv_cache": {"block_size": "big"}, "adapters": [{"identifier": 3}]}),
    beat(capability_fingerprint=FINGERPRINT), beat(capability_fingerprint=f"  {FINGERPRINT} "),
    beat(capability_fingerprint=FINGERPRINT + "0"), beat(capability_fingerprint=None),
    beat(capability_fingerprint=""), beat(capability_fingerprint=7), beat(capability_fingerprint=[FINGERPRINT]),
    beat(capabilities=make_capabilities(), capability_fingerprint=FINGERPRINT),
    beat(capabilities={"surprise": True}, capability_fingerprint=7, inflight="x"),
    # Fields a heartbeat does not have are ignored, a meta patch among them.
    beat(meta={"zone": "eu"}), beat(meta=None, tags=["x"], weight="heavy", host=7),
]


@pytest.mark.parametrize("body", EDGES)
def test_it_answers_every_edge_as_the_declared_serializer_does(body):
    assert hot(body) == declared(body)


numbers = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([MAX_INFLIGHT, MAX_INFLIGHT + 1, MAX_QUANTITY, 100, 100.0001, -0.0])
    | st.from_regex(r"\A\s?-?[0-9]{0,4}(\.[0-9]{0,2})?\s?\Z") | json_values
)
ids = st.none() | st.integers() | st.text(max_size=300) | st.sampled_from(["i-1", " i-1 ", "", "  ", "i" * 256])
fingerprints = st.none() | st.integers() | st.text(max_size=80) | st.sampled_from([FINGERPRINT, "", " "])
capabilities = st.none() | json_values | st.just(make_capabilities()) | st.builds(
    lambda model, extra: {**make_capabilities(), "model": model, **extra}, json_values,
    st.dictionaries(st.sampled_from(["kv_cache", "adapters", "surprise"]), json_values, max_size=1),
)
bodies = st.fixed_dictionaries({}, optional={
    "instance_id": ids, "inflight": numbers, "qps_1m": numbers, "gpu_util": numbers,
    "capabilities": capabilities, "capability_fingerprint": fingerprints, "meta": json_values,
})


@given(st.one_of(bodies, json_values))
def test_it_answers_any_json_body_as_the_declared_serializer_does(body):
    assert hot(body) == declared(body)


def test_it_reads_the_load_sent_and_leaves_out_the_rest():
    assert HEARTBEAT_BODY({"instance_id": " i-1 ", "inflight": 3, "qps_1m": "1.5", "gpu_util": None}) == {
        "inflight": 3, "qps_1m": 1.5, "gpu_util": None, "instance_id": "i-1",
    }

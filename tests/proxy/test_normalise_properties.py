"""``normalise_snapshot`` on arbitrary JSON (hypothesis): it never raises, every column fits
the column it is stored in, and an unknown value never turns into 0 (SPEC 1, 3.1).

Snapshots are drawn snapshot-shaped (the keys the normaliser reads, holding
any JSON, junk words and out-of-range numbers) as well as wholly arbitrary,
so both the well-trodden and the odd paths are walked. No database.
"""

import math

from django.db.backends.base.operations import BaseDatabaseOperations
from hypothesis import example, given, settings
from hypothesis import strategies as st

from proxy_app.ingest.normalise import RESOURCE_FIELDS, normalise_snapshot
from proxy_app.models import InstanceResource
from tests.factories import T0

PROPERTY = settings(max_examples=300, deadline=None, derandomize=True, database=None)

# JSON values, and the words and numbers agents send for "no value" (SPEC 3.1).
NULL_WORDS = ["", " ", "n/a", "N/A", "[n/a]", "not supported", "[Not Supported]", "NaN", "nan", "inf", "-Infinity"]
scalars = (st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12) | st.sampled_from(NULL_WORDS)
           | st.floats(allow_nan=False, allow_infinity=False).map(str))
# Numbers, edges included (a ratio over the smallest float overflows).
EDGES = [0, 0.0, -0.0, 5e-324, 1e-300, 1e15, -1e15, 1e16, 2**53 + 1, 2**63 - 1, 2**63, -2**63]
numbers = (st.integers(min_value=-2**70, max_value=2**70) | st.floats() | st.sampled_from(NULL_WORDS + EDGES)
           | st.floats(allow_nan=False, allow_infinity=False).map(lambda number: f" {number!r}"))
# Words for the admission state, and runs of the one letter whose lower case is two characters.
words = st.text(max_size=40) | st.integers(min_value=0, max_value=40).map("İ".__mul__)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
# Values that are no number: JSON that is not one, the words for "no value", non-finite numbers.
unknown = st.sampled_from([None, True, False, [], {}, [1.0], {"value": 1}, *NULL_WORDS, math.nan, math.inf, -math.inf])


def mostly(usual, other):
    """``usual`` three times in four, else ``other``."""
    return st.integers(min_value=0, max_value=3).flatmap(lambda roll: other if roll == 0 else usual)


def snapshot_of(leaf, other):
    """Snapshots shaped like ``resource_snapshot_v1`` whose readable leaves are drawn from ``leaf``;
    any object in it may instead be ``other`` (e.g. any JSON at all)."""

    def shaped(**members):
        every_key, some_keys = st.fixed_dictionaries(members), st.fixed_dictionaries({}, optional=members)
        return mostly(mostly(every_key, some_keys), other)

    gpu = shaped(**{key: leaf for key in (
        "utilization_pct_avg", "utilization_pct", "utilization_gpu_pct", "gpu_util", "util",
        "utilization_pct_current", "utilization_pct_max", "utilization_sample_count",
        "utilization_sample_timestamp_ms", "utilization_window_ms", "memory_used_mb", "memory_total_mb",
    )}, utilization_sample_ok=st.booleans() | other, utilization_source=st.text(max_size=70) | other,
        utilization_sample_quality=st.sampled_from(["ok", "error", "parse_error", " OK "]) | other)
    devices = shaped(
        cpu=shaped(utilization_pct=leaf),
        memory=shaped(used_mb=leaf, total_mb=leaf, free_mb=leaf),
        network=st.lists(shaped(rx_mbps=leaf, tx_mbps=leaf), max_size=2) | other,
        gpu=st.lists(gpu, max_size=3) | other,
    )
    hint = shaped(memory_free_ratio=leaf, admission_state=words | other)
    return shaped(timestamp_ms=leaf, devices=devices, capacity_hint=hint)


def metadata_of(leaf, other):
    members = {key: leaf for key in ("report_monotonic_ms", "report_wall_time_ms", "agent_snapshot_timestamp_ms",
                                     "report_seq")}
    members["reported_instance_id"] = st.text(max_size=300) | other
    return mostly(st.fixed_dictionaries({}, optional=members), other)


INTEGER_RANGES = BaseDatabaseOperations.integer_field_ranges


def assert_fits_its_column(name, value):
    field = InstanceResource._meta.get_field(name)
    kind = field.get_internal_type()
    if value is None:
        assert field.null, name
    elif kind == "FloatField":
        assert type(value) is float and math.isfinite(value), (name, value)
    elif kind in INTEGER_RANGES:
        low, high = INTEGER_RANGES[kind]
        assert type(value) is int and low <= value <= high, (name, value)
    elif kind == "CharField":
        assert type(value) is str and value and len(value) <= field.max_length, (name, value)
    else:
        raise AssertionError(f"{name}: no rule for {kind}")


@PROPERTY
@given(snapshot=snapshot_of(mostly(numbers, json_values), json_values),
       metadata=metadata_of(mostly(numbers, json_values), json_values))
@example(snapshot={"capacity_hint": {"admission_state": "İ" * 32}}, metadata={})  # found: 64 characters stored
def test_it_fits_every_column_whatever_the_snapshot(snapshot, metadata):
    columns = normalise_snapshot(snapshot, metadata, T0)
    assert set(columns) == {*RESOURCE_FIELDS, "raw_resource", "kv_events_ok_count", "adapter_parents"}  # SPEC 15.5, 16.1
    assert columns["kv_events_ok_count"] is None or columns["kv_events_ok_count"] >= 0
    for name in RESOURCE_FIELDS:
        assert_fits_its_column(name, columns[name])
    assert columns["raw_resource"] == (snapshot if isinstance(snapshot, dict) else {})
    assert columns["resource_reported_at"] == T0


@PROPERTY
@given(used=numbers, total=numbers, free=numbers)
@example(used=0.0, total=8.560360764929922e-305, free=1e15)  # found by this property: free / total was inf
def test_it_fits_the_columns_it_computes_from_two_numbers(used, total, free):
    # A derived value (here free / total) may overflow where its inputs did not.
    columns = normalise_snapshot({"devices": {"memory": {"used_mb": used, "total_mb": total, "free_mb": free}}}, {}, T0)
    for name in ("memory_used_mb", "memory_total_mb", "memory_free_mb", "memory_free_ratio"):
        assert_fits_its_column(name, columns[name])


# A column that is a count of rows the snapshot listed (a measured "none" is 0), or not a number.
COUNTS_AND_WORDS = {"gpu_count", "gpu_error_count", "gpu_sample_source", "gpu_sample_quality", "gpu_sample_coverage", "admission_state",
                    "reported_instance_id", "resource_reported_at"}


@PROPERTY
@given(snapshot=snapshot_of(unknown, unknown), metadata=metadata_of(unknown, unknown))
def test_it_never_turns_an_unknown_value_into_zero(snapshot, metadata):
    columns = normalise_snapshot(snapshot, metadata, T0)
    assert {name: columns[name] for name in RESOURCE_FIELDS if name not in COUNTS_AND_WORDS
            and columns[name] is not None} == {}


@PROPERTY
@given(value=st.integers(min_value=-10**15, max_value=10**15) | st.floats(min_value=-1e15, max_value=1e15)
       | st.floats(min_value=-1e15, max_value=1e15).map(lambda number: f" {number!r} "))
def test_it_keeps_a_measured_number_zero_included(value):
    snapshot = {"devices": {"cpu": {"utilization_pct": value}, "memory": {"used_mb": value}}}
    columns = normalise_snapshot(snapshot, {}, T0)
    assert columns["cpu_util"] == columns["memory_used_mb"] == float(value)

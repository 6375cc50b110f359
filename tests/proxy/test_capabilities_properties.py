"""``parse_capabilities`` on arbitrary JSON (hypothesis, SPEC 3.2): a flat error or a canonical
object, and a fingerprint that does not depend on key order or on parsing twice.

Capabilities are drawn shaped like ``InstanceCapability`` (each member valid,
null, of the wrong type, or an unknown key beside them) as well as wholly
arbitrary, so both answers are reached often. No database.
"""

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.capabilities import CAPABILITY, CapabilityError, fingerprint, full_view, parse_capabilities

PROPERTY = settings(max_examples=400, deadline=None, derandomize=True, database=None)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**64, max_value=2**64)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
texts = st.none() | st.text(max_size=20)


def mostly(usual, other):
    """``usual`` three times in four, else ``other``."""
    return st.integers(min_value=0, max_value=3).flatmap(lambda roll: other if roll == 0 else usual)


def record(**members):
    """An object with some of ``members``, now and then an unknown key too, or any JSON at all."""
    known = st.fixed_dictionaries({}, optional=members)
    unknown_key = st.dictionaries(st.text(min_size=1, max_size=8).filter(lambda key: key not in members), json_values,
                                  max_size=1)
    with_unknown = st.tuples(known, unknown_key).map(lambda pair: {**pair[0], **pair[1]})
    return mostly(mostly(known, with_unknown), json_values)


sizes = mostly(st.none() | st.integers(min_value=1, max_value=2**31 - 1), st.integers() | json_values)
identity = record(identifier=mostly(texts, json_values), revision=mostly(texts, json_values))
adapter = record(identifier=mostly(st.text(max_size=20), json_values), revision=texts,
                 configuration=mostly(st.none() | st.dictionaries(st.text(max_size=5), json_values, max_size=3),
                                      json_values),
                 configuration_hash=texts)
capabilities = record(
    schema_version=mostly(texts, json_values),
    model=identity,
    tokenizer=identity,
    adapters=mostly(st.none() | st.lists(adapter, max_size=3), json_values),
    kv_cache=record(layout=texts, schema_version=texts, dtype=mostly(texts, json_values), block_size=sizes,
                    layout_parameters=mostly(st.none() | st.dictionaries(st.text(max_size=5), json_values,
                                                                         max_size=3), json_values)),
    parallelism=record(tensor_parallel_size=sizes, pipeline_parallel_size=sizes, data_parallel_size=sizes),
    runtime=record(vllm_version=texts, lmcache_version=texts,
                   supported_cache_features=mostly(st.none() | st.lists(st.text(max_size=6), max_size=5),
                                                   st.lists(json_values, max_size=2) | json_values)),
)

# "capabilities", then members by name and list items by index; an unknown key is named as sent.
KNOWN_PATH = re.compile(r"capabilities(\.[a-z_]+|\[\d+\])*")
MEMBER_PATH = re.compile(r"capabilities(\.[a-z_]+|\[\d+\])*\.")


def reordered(value):
    """The same JSON with every object's keys in reverse order."""
    if isinstance(value, dict):
        return {key: reordered(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reordered(item) for item in value]
    return value


def assert_no_null_members(value, record=CAPABILITY):
    """Null members of the typed objects are dropped (free-form objects are kept as sent);
    typed sub-objects and lists are always there, empty or not."""
    for key, member in record.members.items():
        if key not in value:
            assert not hasattr(member, "members") and not hasattr(member, "item"), key
            continue
        assert value[key] is not None, key
        if hasattr(member, "members"):
            assert_no_null_members(value[key], member)
        elif hasattr(member, "item"):
            for item in value[key]:
                assert_no_null_members(item, member.item)


def parse(value):
    """``(canonical, None)`` or ``(None, errors)``."""
    try:
        return parse_capabilities(value), None
    except CapabilityError as error:
        return None, error.errors


@PROPERTY
@given(value=capabilities)
def test_it_answers_flat_errors_or_a_canonical_object(value):
    canonical, errors = parse(value)
    if errors is not None:
        assert errors, "an error names at least one field"
        for path, messages in errors.items():
            assert isinstance(path, str) and path.startswith("capabilities"), path
            assert isinstance(messages, list) and messages and all(isinstance(m, str) for m in messages), path
            if messages == ["Unknown field."]:
                assert MEMBER_PATH.match(path), path
            else:
                assert KNOWN_PATH.fullmatch(path), path
        return
    if value is None:
        assert canonical is None
        return
    assert canonical["schema_version"] is not None
    assert_no_null_members(canonical)
    features = canonical.get("runtime", {}).get("supported_cache_features")
    if features is not None:
        assert features == sorted(set(features))
    view = full_view(canonical)
    assert set(view) == set(CAPABILITY.members)


@PROPERTY
@given(value=capabilities)
def test_it_fingerprints_what_a_list_row_shows_as_what_was_registered(value):
    """An instance that reads its own list row and sends it back gets the fingerprint it had."""
    canonical, errors = parse(value)
    if errors is not None or canonical is None:
        return
    shown = parse_capabilities(full_view(canonical))
    assert shown == canonical
    assert fingerprint(shown) == fingerprint(canonical)


@PROPERTY
@given(value=capabilities)
def test_it_fingerprints_the_same_whatever_the_key_order_and_on_a_second_parse(value):
    canonical, errors = parse(value)
    again, errors_again = parse(reordered(value))
    if errors is not None:
        assert errors_again == errors
        return
    assert again == canonical
    assert fingerprint(again) == fingerprint(canonical)
    assert parse_capabilities(canonical) == canonical
    assert fingerprint(parse_capabilities(canonical)) == fingerprint(canonical)
    if canonical is not None:
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", fingerprint(canonical))

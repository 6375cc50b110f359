"""The typed capabilities and their fingerprint (SPEC 3.2): pure functions, no database.

The fingerprint vectors were computed by hand from the SPEC recipe: the
canonical JSON is written out literally, and its digest was taken with
``printf '%s' '<json>' | sha256sum``, not with the code under test.
"""

import pytest

from proxy_app.capabilities import CapabilityError, canonical_json, fingerprint, full_view, parse_capabilities
from tests.factories import make_capabilities

EMPTY_DIGEST = "sha256:5e8693161ce3c913ee2ba9a48f9ba4ee386d8e23a6f49eeab96bae5f08878ead"


def canonical(value):
    return canonical_json(parse_capabilities(value)).decode("utf-8")


def test_it_fills_the_schema_version_of_an_empty_object():
    assert canonical({}) == '{"schema_version":"1"}'
    assert fingerprint(parse_capabilities({})) == EMPTY_DIGEST


def test_it_sorts_keys_drops_nulls_fills_defaults_and_sorts_unique_features():
    value = {
        "runtime": {"vllm_version": "0.8.1", "lmcache_version": None,
                    "supported_cache_features": ["prefix", "offload", "prefix"]},
        "model": {"revision": "main", "identifier": "meta-llama/Llama-3.1-8B"},
        "tokenizer": None,
        "kv_cache": {"layout": "paged", "dtype": "bf16", "block_size": 16, "schema_version": None},
    }
    expected = ('{"kv_cache":{"block_size":16,"dtype":"bf16","layout":"paged","layout_parameters":{}},'
                '"model":{"identifier":"meta-llama/Llama-3.1-8B","revision":"main"},'
                '"runtime":{"supported_cache_features":["offload","prefix"],"vllm_version":"0.8.1"},'
                '"schema_version":"1"}')
    assert canonical(value) == expected
    assert fingerprint(parse_capabilities(value)) == (
        "sha256:f6d5dbe448bbed8c658ffba3905b057413b176e01c042ad3f655e5622c7379c5"
    )


def test_it_keeps_non_ascii_text_as_utf8_and_free_form_objects_as_sent():
    value = {
        "schema_version": "2",
        "model": {"identifier": "modèle-日本", "revision": None},
        "adapters": [{"identifier": "sql-lora", "configuration": {"r": 8, "alpha": 16}}],
        "parallelism": {"tensor_parallel_size": 2, "pipeline_parallel_size": None},
    }
    expected = ('{"adapters":[{"configuration":{"alpha":16,"r":8},"identifier":"sql-lora"}],'
                '"model":{"identifier":"modèle-日本"},"parallelism":{"tensor_parallel_size":2},'
                '"schema_version":"2"}')
    assert canonical(value) == expected
    assert "\\u" not in canonical(value)
    assert fingerprint(parse_capabilities(value)) == (
        "sha256:6ff8b30b3b0be49f606534c9219164bb86e7a42f737d92cb49424549b98a9555"
    )


def test_it_gives_the_same_fingerprint_whatever_the_key_and_feature_order():
    one = make_capabilities(runtime={"supported_cache_features": ["b", "a", "b"], "vllm_version": "1"})
    two = dict(reversed(list(make_capabilities(runtime={"vllm_version": "1", "supported_cache_features": ["a", "b"]})
                             .items())))
    assert fingerprint(parse_capabilities(one)) == fingerprint(parse_capabilities(two))


def test_it_changes_the_fingerprint_when_anything_that_matters_changes():
    base = fingerprint(parse_capabilities(make_capabilities()))
    changed = make_capabilities(kv_cache={"layout": "paged", "dtype": "float16", "block_size": 16})
    assert fingerprint(parse_capabilities(changed)) != base


def test_it_gives_no_fingerprint_without_capabilities():
    assert parse_capabilities(None) is None
    assert fingerprint(None) is None


def test_it_shows_every_field_with_absent_optionals_null():
    view = full_view(parse_capabilities({"model": {"identifier": "m"}, "adapters": [{"identifier": "a"}]}))
    assert view == {
        "schema_version": "1",
        "model": {"identifier": "m", "revision": None},
        "tokenizer": None,
        "adapters": [{"identifier": "a", "revision": None, "configuration": None, "configuration_hash": None}],
        "kv_cache": None,
        "parallelism": None,
        "runtime": None,
    }
    assert full_view(None) is None


@pytest.mark.parametrize("value, path", [
    ({"gpu_count": 8}, "gpu_count"),
    ({"model": {"identifier": "m", "name": "x"}}, "model.name"),
    ({"kv_cache": {"block_size": 0}}, "kv_cache.block_size"),
    ({"kv_cache": {"block_size": -16}}, "kv_cache.block_size"),
    ({"kv_cache": {"block_size": 16.5}}, "kv_cache.block_size"),
    ({"kv_cache": {"block_size": True}}, "kv_cache.block_size"),
    ({"parallelism": {"tensor_parallel_size": -1}}, "parallelism.tensor_parallel_size"),
    ({"parallelism": {"data_parallel_size": "2"}}, "parallelism.data_parallel_size"),
    ({"adapters": [{"revision": "v1"}]}, "adapters[0].identifier"),
    ({"adapters": [{"identifier": 7}]}, "adapters[0].identifier"),
    ({"adapters": "sql-lora"}, "adapters"),
    ({"adapters": [None]}, "adapters[0]"),
    ({"adapters": [{"identifier": "a", "configuration": [1]}]}, "adapters[0].configuration"),
    ({"runtime": {"supported_cache_features": "prefix"}}, "runtime.supported_cache_features"),
    ({"runtime": {"supported_cache_features": ["prefix", 3]}}, "runtime.supported_cache_features[1]"),
    ({"kv_cache": {"layout_parameters": "x"}}, "kv_cache.layout_parameters"),
    ({"model": "llama"}, "model"),
    ({"schema_version": 1}, "schema_version"),
])
def test_it_refuses_capabilities_of_the_wrong_shape_naming_the_field(value, path):
    with pytest.raises(CapabilityError) as raised:
        parse_capabilities(value)
    assert f"capabilities.{path}" in raised.value.errors


def test_it_refuses_a_capabilities_value_that_is_not_an_object():
    with pytest.raises(CapabilityError) as raised:
        parse_capabilities(["lora"])
    assert list(raised.value.errors) == ["capabilities"]


def test_it_keeps_unknown_keys_inside_the_free_form_objects():
    parsed = parse_capabilities({"kv_cache": {"layout_parameters": {"anything": {"deep": None}}}})
    assert parsed["kv_cache"]["layout_parameters"] == {"anything": {"deep": None}}

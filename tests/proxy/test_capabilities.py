"""The typed capabilities and their fingerprint (SPEC 3.2): pure functions, no database.

``data/capability_vectors.json`` holds vectors computed by the original
CacheRoute Instance's own code; the other digests here were taken by hand
from the written-out canonical JSON with ``printf '%s' '<json>' | sha256sum``,
not with the code under test.
"""

import json
from pathlib import Path

import pytest

from agent.capabilities import CapabilityError, canonical_json, fingerprint, full_view, parse_capabilities
from tests.factories import make_capabilities

VECTORS = json.loads((Path(__file__).parent / "data" / "capability_vectors.json").read_text("utf-8"))["vectors"]


def canonical(value):
    return canonical_json(parse_capabilities(value)).decode("utf-8")


@pytest.mark.parametrize("vector", VECTORS, ids=lambda vector: json.dumps(vector["sent"], ensure_ascii=False))
def test_it_computes_the_originals_canonical_form_and_fingerprint(vector):
    assert canonical(vector["sent"]) == vector["canonical"]
    assert fingerprint(parse_capabilities(vector["sent"])) == vector["fingerprint"]


def test_it_keeps_empty_objects_and_lists_and_fills_every_typed_member():
    parsed = parse_capabilities({"adapters": [], "kv_cache": {}})
    assert parsed == {"schema_version": "1", "model": {}, "tokenizer": {}, "adapters": [],
                      "kv_cache": {"layout_parameters": {}}, "parallelism": {},
                      "runtime": {"supported_cache_features": []}}


def test_it_reads_a_null_member_as_absent():
    assert parse_capabilities({"model": None, "adapters": None, "runtime": {"supported_cache_features": None},
                               "schema_version": None}) == parse_capabilities({})


def test_it_keeps_an_adapters_empty_configuration_and_drops_a_null_one():
    parsed = parse_capabilities({"adapters": [{"identifier": "a", "configuration": {}},
                                             {"identifier": "b", "configuration": None}]})
    assert parsed["adapters"] == [{"identifier": "a", "configuration": {}}, {"identifier": "b"}]


def test_it_leaves_a_full_dump_as_it_is():
    dump = make_capabilities()
    dump["tokenizer"] = {"identifier": dump["tokenizer"]["identifier"]}  # exclude_none drops the null revision
    dump["adapters"][0].pop("configuration_hash")
    dump["parallelism"].pop("data_parallel_size")
    dump["kv_cache"]["layout_parameters"] = {}
    assert parse_capabilities(dump) == dump


def test_it_sorts_keys_drops_nulls_fills_defaults_and_sorts_unique_features():
    value = {
        "runtime": {"vllm_version": "0.8.1", "lmcache_version": None,
                    "supported_cache_features": ["prefix", "offload", "prefix"]},
        "model": {"revision": "main", "identifier": "meta-llama/Llama-3.1-8B"},
        "tokenizer": None,
        "kv_cache": {"layout": "paged", "dtype": "bf16", "block_size": 16, "schema_version": None},
    }
    expected = ('{"adapters":[],"kv_cache":{"block_size":16,"dtype":"bf16","layout":"paged","layout_parameters":{}},'
                '"model":{"identifier":"meta-llama/Llama-3.1-8B","revision":"main"},"parallelism":{},'
                '"runtime":{"supported_cache_features":["offload","prefix"],"vllm_version":"0.8.1"},'
                '"schema_version":"1","tokenizer":{}}')
    assert canonical(value) == expected
    assert fingerprint(parse_capabilities(value)) == (
        "sha256:857cb05d44ba5541a1107539c2172fe9a4ce57ac23f3f87b4997e09bd99acf55"
    )


def test_it_keeps_non_ascii_text_as_utf8_and_free_form_objects_as_sent():
    value = {
        "schema_version": "2",
        "model": {"identifier": "modèle-日本", "revision": None},
        "adapters": [{"identifier": "sql-lora", "configuration": {"r": 8, "alpha": 16}}],
        "parallelism": {"tensor_parallel_size": 2, "pipeline_parallel_size": None},
    }
    expected = ('{"adapters":[{"configuration":{"alpha":16,"r":8},"identifier":"sql-lora"}],'
                '"kv_cache":{"layout_parameters":{}},"model":{"identifier":"modèle-日本"},'
                '"parallelism":{"tensor_parallel_size":2},"runtime":{"supported_cache_features":[]},'
                '"schema_version":"2","tokenizer":{}}')
    assert canonical(value) == expected
    assert "\\u" not in canonical(value)
    assert fingerprint(parse_capabilities(value)) == (
        "sha256:96705ce002b3a36a267d50f28f19487e1eb20f56a8b59302c621a4473cb2ee8d"
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


def test_it_shows_every_field_with_defaults_filled_and_absent_optionals_null():
    view = full_view(parse_capabilities({"model": {"identifier": "m"}, "adapters": [{"identifier": "a"}]}))
    assert view == {
        "schema_version": "1",
        "model": {"identifier": "m", "revision": None},
        "tokenizer": {"identifier": None, "revision": None},
        "adapters": [{"identifier": "a", "revision": None, "configuration": None, "configuration_hash": None}],
        "kv_cache": {"layout": None, "schema_version": None, "dtype": None, "block_size": None,
                     "layout_parameters": {}},
        "parallelism": {"tensor_parallel_size": None, "pipeline_parallel_size": None, "data_parallel_size": None},
        "runtime": {"vllm_version": None, "lmcache_version": None, "supported_cache_features": []},
    }
    assert full_view(None) is None


def test_it_shows_every_field_of_a_form_stored_before_empty_members_were_kept():
    assert full_view({"schema_version": "1"}) == full_view(parse_capabilities({}))


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
    ({"adapters": ["sql-lora"]}, "adapters[0]"),
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

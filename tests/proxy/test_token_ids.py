"""A placement body's token ids read into packed bytes (``proxy_app/api/token_ids.py``, ``_token_ids.c``) against
``parse_json_body``, the parse every other body gets: the same data (the ids as SPEC 15.1 packs them), the same
error with the same words, for every body. No database."""

import json
from array import array

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rest_framework import exceptions

from agent.prefix_keys import MAX_TOKEN_ID, token_bytes
from controlplane.api.parsers import parse_json_body
from proxy_app.api import token_ids
from proxy_app.api.token_ids import parse_placement_body
from tests.strategies import json_values

FIELD = "prompt_token_ids"


def outcome(parse, raw):
    """``parse(raw)``'s data, with a token id list as the bytes it packs to; or its error's class and words."""
    try:
        data = parse(raw)
    except exceptions.APIException as error:
        return "error", type(error).__name__, str(error.detail)
    if isinstance(data, dict) and isinstance(data.get(FIELD), list):
        try:
            data = {**data, FIELD: token_bytes(data[FIELD])}
        except (TypeError, ValueError):
            pass
    return "data", data


def assert_same(raw):
    assert outcome(parse_placement_body, raw) == outcome(parse_json_body, raw)


def test_it_is_built_in_c_by_the_install():
    assert token_ids.COMPILED


def test_it_hands_over_a_plain_array_as_packed_bytes_and_the_rest_as_parsed():
    ids = [0, 7, 511, MAX_TOKEN_ID, 128]
    raw = b'{"model": "m",\n "prompt_token_ids" :[ 0,7 ,\t511,4294967295, 128\r\n] , "meta": {"prompt_token_ids": [1]}}'
    data = parse_placement_body(raw)
    assert data == {"model": "m", FIELD: array("I", ids).tobytes(), "meta": {FIELD: [1]}}
    assert parse_placement_body(b'{"prompt_token_ids": []}') == {FIELD: b""}


@pytest.mark.parametrize("raw", [
    b'{"prompt_token_ids": [01]}', b'{"prompt_token_ids": [4294967296]}', b'{"prompt_token_ids": [99999999999]}',
    b'{"prompt_token_ids": [1.0]}', b'{"prompt_token_ids": [1e2]}', b'{"prompt_token_ids": [-1]}',
    b'{"prompt_token_ids": [-0]}', b'{"prompt_token_ids": [true]}', b'{"prompt_token_ids": [1,]}',
    b'{"prompt_token_ids": [,1]}', b'{"prompt_token_ids": [1 2]}', b'{"prompt_token_ids": [1]',
    b'{"prompt_token_ids": [1], "prompt_token_ids": [2]}', b'{"prompt_token_ids": null, "prompt_token_ids": [2]}',
    b'{"prompt_\\u0074oken_ids": [1]}', b'{"prompt_token_ids":[1,2],"prompt_\\u0074oken_ids":[3]}',
    b'{"prompt_\\u0074oken_ids":[3],"prompt_token_ids":[1,2]}', b'{"a\\u0062": 1, "prompt_token_ids": [1]}',
    b'{"prompt_token_ids": "[1]"}', b'{"prompt_token_ids": [1]} x',
    b'{"prompt_token_ids": [1]}}', b'{"a": "\\"prompt_token_ids\\": [1]", "b": 1}', b'[{"prompt_token_ids": [1]}]',
    b'{"a": [1, {"prompt_token_ids": [1]}], "prompt_token_ids": [2]}', b'{"a": 1 "prompt_token_ids": [1]}',
    b'{"a": nul, "prompt_token_ids": [1]}', b'{"a": "\\ud800", "prompt_token_ids": [1]}',
    b'{"a": "\\u0000", "prompt_token_ids": [1]}', b'\xef\xbb\xbf{"prompt_token_ids": [1]}', b'{"prompt_token_ids": [',
    b'{"prompt_token_ids" [1]}', b'{"prompt_token_ids":', b'{prompt_token_ids: [1]}', b'{}', b'',
    b'{"a": ' + b'[' * 70 + b']' * 70 + b', "prompt_token_ids": [1]}',
])
def test_it_answers_every_other_body_as_the_whole_parse_does(raw):
    assert_same(raw)


bodies = st.dictionaries(
    st.sampled_from([FIELD, "model", "meta", 'a"b', "a\\b", "[", "{", "}", ""]) | st.text(max_size=4),
    json_values | st.lists(st.integers(0, 2**33), max_size=20), max_size=5)


def layouts(draw, value):
    """``value`` written as a client might: compact, spaced, indented, with escapes or without."""
    style = draw(st.sampled_from(["compact", "spaced", "indented", "ascii"]))
    if style == "compact":
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
    if style == "spaced":
        return json.dumps(value, separators=(" , ", " : "), ensure_ascii=False).encode("utf-8", "surrogatepass")
    if style == "indented":
        return json.dumps(value, indent="\t\r\n ", ensure_ascii=False).encode("utf-8", "surrogatepass")
    return json.dumps(value).encode()


@given(st.data())
def test_every_json_object_is_read_as_the_whole_parse_reads_it(data):
    value = data.draw(bodies)
    raw = layouts(data.draw, value)
    assert_same(raw)
    ids = value.get(FIELD)
    plain = isinstance(ids, list) and all(type(item) is int and 0 <= item <= MAX_TOKEN_ID for item in ids)
    # A top-level name written with an escape (as json.dumps may write any of them) sends the body to the whole parse.
    plain = plain and not any("\\" in json.dumps(name) for name in value)
    if plain and outcome(parse_json_body, raw)[0] == "data":
        assert isinstance(parse_placement_body(raw)[FIELD], bytes), "a plain array is read by the C module"


@given(st.data())
def test_a_body_cut_or_changed_anywhere_is_answered_as_the_whole_parse_answers_it(data):
    raw = bytearray(layouts(data.draw, data.draw(bodies.map(lambda body: {**body, FIELD: [3, 10, 400]}))))
    position = data.draw(st.integers(0, len(raw)))
    change = data.draw(st.sampled_from(["cut", "insert", "replace"]))
    byte = data.draw(st.sampled_from(b' ,:[]{}"\\0123456789-.eE\x00ntf'))
    if change == "cut":
        del raw[position:]
    elif change == "insert":
        raw.insert(position, byte)
    elif position < len(raw):
        raw[position] = byte
    assert_same(bytes(raw))

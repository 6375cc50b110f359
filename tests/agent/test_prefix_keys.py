"""SPEC 15.1's block keys, worked out by hand from hashlib so the definition, not the module, is the reference."""

import hashlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent import prefix_keys
from agent.prefix_keys import chain_keys, prompt_keys, py_chain, py_pack_tokens, seed_of


def blake64(data):
    return struct.unpack("<q", hashlib.blake2b(data, digest_size=8).digest())[0]


def test_it_seeds_the_chain_with_the_model_and_the_adapter():
    assert seed_of("m") == blake64(b"m")
    assert seed_of("m", "lora-a") == blake64(b"m\x00lora-a")
    assert seed_of("m", "lora-a") != seed_of("m")


def test_it_chains_each_full_block_from_the_last_key():
    tokens = list(range(1, 9))
    first = blake64(struct.pack("<q", seed_of("m")) + struct.pack("<4I", 1, 2, 3, 4))
    second = blake64(struct.pack("<q", first) + struct.pack("<4I", 5, 6, 7, 8))
    assert prompt_keys("m", tokens, block_tokens=4) == [first, second]


def test_it_gives_a_trailing_partial_block_no_key():
    assert len(prompt_keys("m", list(range(11)), block_tokens=4)) == 2
    assert prompt_keys("m", [1, 2, 3], block_tokens=4) == []


def test_it_reads_keys_as_signed_64_bit_integers():
    keys = prompt_keys("m", list(range(16 * 64)))
    assert all(-2**63 <= key < 2**63 for key in keys)
    assert any(key < 0 for key in keys)


def test_it_gives_one_engine_block_the_keys_of_its_sub_blocks_chained_from_its_parent():
    # An engine block of 8 tokens is two 4-token keys, chained from the parent block's last key.
    tokens = list(range(100, 116))
    whole = prompt_keys("m", tokens, block_tokens=4)
    parent_last = whole[1]
    assert chain_keys(parent_last, tokens[8:], block_tokens=4) == whole[2:]


def test_it_tells_models_and_prefixes_apart():
    assert prompt_keys("a", [1, 2, 3, 4], 4) != prompt_keys("b", [1, 2, 3, 4], 4)
    assert prompt_keys("a", [1, 2, 3, 5], 4) != prompt_keys("a", [1, 2, 3, 4], 4)


def test_it_refuses_a_token_outside_four_bytes():
    with pytest.raises(ValueError):
        prompt_keys("m", [-1, 2, 3, 4], 4)
    with pytest.raises(ValueError):
        prompt_keys("m", [2**32, 2, 3, 4], 4)


def test_it_refuses_a_token_that_is_not_an_int():
    for bad in (True, 1.0, "1", None):
        with pytest.raises(TypeError):
            prompt_keys("m", [1, bad, 3, 4], 4)


# The per-block loop is built in C by the install (agent/_blocks.c); the same functions stay in Python for an
# install without a compiler. Both are held to each other here, and through prompt_keys to hashlib above.

def test_it_is_built_in_c_by_the_install():
    from agent import _blocks

    assert prefix_keys.COMPILED
    assert prefix_keys.token_bytes is _blocks.pack_tokens


@given(st.integers(-2**63, 2**63 - 1), st.binary(max_size=700), st.integers(1, 300))
def test_its_c_chain_gives_the_python_chain(previous, data, width):
    from agent import _blocks

    assert _blocks.chain(previous, data, width) == py_chain(previous, data, width)


TOKEN_ITEMS = st.one_of(st.integers(0, 2**32 - 1), st.integers(-2**70, 2**70), st.booleans(), st.floats(),
                        st.text(max_size=2), st.none())


def outcome(pack, tokens):
    """The bytes, or the refusal (TypeError for a wrong type, ValueError for a range: which one when a list holds
    both may differ, the refusal may not)."""
    try:
        return pack(tokens)
    except (TypeError, ValueError) as exc:
        return "refused" if any(type(token) is not int for token in tokens) else type(exc)


@given(st.lists(TOKEN_ITEMS, max_size=40))
def test_its_c_check_of_token_ids_gives_the_pythons(tokens):
    from agent import _blocks

    assert outcome(_blocks.pack_tokens, tokens) == outcome(py_pack_tokens, tokens)


def test_its_c_chain_refuses_what_the_pythons_refuses():
    from agent import _blocks

    for chain in (_blocks.chain, py_chain):
        with pytest.raises(ValueError):
            chain(0, b"x" * 8, 0)


@given(st.lists(st.integers(0, 2**32 - 1), max_size=80), st.integers(1, 9))
def test_it_takes_token_ids_already_packed(tokens, block_tokens):
    assert prompt_keys("m", py_pack_tokens(tokens), block_tokens) == prompt_keys("m", tokens, block_tokens)

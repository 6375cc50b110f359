"""SPEC 15.1's block keys, worked out by hand from hashlib so the definition, not the module, is the reference."""

import hashlib
import struct

import pytest

from agent.prefix_keys import chain_keys, prompt_keys, seed_of


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

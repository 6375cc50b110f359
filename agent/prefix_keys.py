"""Prompt block keys (SPEC 15.1): one function that the agent, the Proxy and any router compute alike.

A token sequence splits into full blocks of ``block_tokens`` tokens (a trailing
partial block has no key). Each block's key is BLAKE2b with an 8-byte digest of
the previous key (or, for the first block, the model's seed) followed by the
block's tokens as 4-byte unsigned little-endian integers; the digest is read as
a signed 64-bit little-endian integer, so a key fits a database BIGINT. Equal
keys mean the same model, adapter and prefix up to that block, whatever the
engine's own hash or block size.

Standard library only, so a router imports it without Django or the agent's
dependencies; its per-block loop runs in C (``agent/_blocks.c``) where ``pip``
built it, and in Python, with the same answers, where no C compiler was::

    >>> from agent.prefix_keys import prompt_keys
    >>> keys = prompt_keys("tiny-llama", list(range(40)), block_tokens=16)
    >>> len(keys)  # 40 tokens: two full blocks of 16, the last 8 tokens have no key
    2
"""

from __future__ import annotations

import sys
from array import array
from hashlib import blake2b

DEFAULT_BLOCK_TOKENS = 16
MAX_TOKEN_ID = 2**32 - 1


def digest(data: bytes) -> int:
    """BLAKE2b-64 of ``data`` as a signed 64-bit integer."""
    return int.from_bytes(blake2b(data, digest_size=8).digest(), "little", signed=True)


def key_bytes(key: int) -> bytes:
    return key.to_bytes(8, "little", signed=True)


def seed_of(model: str, adapter: str | None = None) -> int:
    """The chain's start: the model's name, and the adapter's (LoRA) after a NUL when one is meant."""
    name = model if adapter is None else f"{model}\x00{adapter}"
    return digest(name.encode())


def py_pack_tokens(tokens) -> bytes:
    """Tokens as 4-byte unsigned little-endian integers: TypeError for an item that is not an ``int`` (a ``bool``
    is not), ValueError for one outside 0..2**32-1. ``agent._blocks.pack_tokens`` where it was built."""
    if not set(map(type, tokens)) <= {int}:
        raise TypeError("a token id must be an int")
    try:
        packed = array("I", tokens)
    except OverflowError as exc:
        raise ValueError(f"a token id must be 0..{MAX_TOKEN_ID}") from exc
    if packed.itemsize != 4:  # pragma: no cover - every platform CPython supports today has a 4-byte int
        packed = array("L", tokens)
    if sys.byteorder != "little":  # pragma: no cover - the machines we run on are little-endian
        packed.byteswap()
    return packed.tobytes()


def py_chain(previous: int, data: bytes, width: int) -> bytes:
    """The digests of ``data``'s full ``width``-byte blocks, chained from ``previous``, concatenated (8 bytes each,
    little-endian): a key's 8 bytes are its digest as BLAKE2b gives it, so the chain runs on the digests and they
    are read as signed integers once at the end. ``agent._blocks.chain`` where it was built."""
    if width < 1:
        raise ValueError("width must be at least 1")
    digests = bytearray()
    last = key_bytes(previous)
    for start in range(0, len(data) - width + 1, width):
        last = blake2b(last + data[start:start + width], digest_size=8).digest()
        digests += last
    return bytes(digests)


try:
    # The same two functions in C (agent/_blocks.c), built by ``pip install`` where a C compiler is: the agent
    # chains every block an engine stores, thousands a second, and the Proxy a prompt's blocks per placement
    # (256 for 4,096 tokens: ~0.04 ms in C against ~0.15 ms in Python, and the check 0.006 ms against 0.09).
    from agent._blocks import chain as _chain
    from agent._blocks import pack_tokens as token_bytes
except ImportError:  # pragma: no cover - installed without a C compiler: the same answers, slower
    _chain, token_bytes = py_chain, py_pack_tokens
COMPILED = _chain is not py_chain


def chain_keys(previous: int, tokens, block_tokens: int = DEFAULT_BLOCK_TOKENS) -> list[int]:
    """The keys of ``tokens``' full blocks, chained from ``previous`` (a seed or the parent block's last key).
    ``tokens``: token ids, or ``bytes`` of them packed as 15.1 packs them (``token_bytes``)."""
    if block_tokens < 1:
        raise ValueError("block_tokens must be at least 1")
    packed = tokens if isinstance(tokens, bytes) else token_bytes(tokens)
    keys = array("q", _chain(previous, packed, 4 * block_tokens))
    if sys.byteorder != "little":  # pragma: no cover - the machines we run on are little-endian
        keys.byteswap()
    return keys.tolist()


def prompt_keys(model: str, tokens, block_tokens: int = DEFAULT_BLOCK_TOKENS, adapter: str | None = None) -> list[int]:
    """A prompt's block keys from its first token: ``chain_keys`` from the model's seed."""
    return chain_keys(seed_of(model, adapter), tokens, block_tokens)

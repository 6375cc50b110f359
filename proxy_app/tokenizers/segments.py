"""Repeated text is not tokenized again (SPEC 16.3): a bounded cache of segments' token ids, per process.

A segment is the text between two added tokens (``<|im_start|>``, ``<|im_end|>``
…): a system prompt, an earlier turn, a tool list. The ``tokenizers`` library
splits a text at its added tokens before it normalises or pre-tokenizes
anything, so the ids of a whole text are its segments' ids and the added
tokens' ids in order, and a turn seen before costs a dictionary lookup.
Where a tokenizer could break that (an added token that strips the space
beside it or is normalised, a pre-tokenizer that treats the first piece of a
text apart), ``Segmenter.of`` finds it out on sample texts when the tokenizer is
loaded and the tokenizer's texts are tokenized whole instead.

The cache holds at most ``max_bytes`` (``FLEETWATCH_TOKENIZER_CACHE_MB``, 64 MiB
by default): each entry counts its text's and its ids' objects as Python sizes
them (``sys.getsizeof``: a byte a character for Latin-1 text, 4 bytes an id)
plus ``ENTRY_OVERHEAD`` for the dictionary's slot and key; the least recently
used go first. Short segments are not kept
(``MIN_CHARS``): they cost less to tokenize than to look up and would push out
the long ones.
"""

from __future__ import annotations

import re
import sys
import threading
from collections import OrderedDict

from agent.prefix_keys import token_bytes

MIN_CHARS = 64
# A pre-tokenizer that treats a text's first piece apart (Metaspace's ``prepend_scheme: first``): the library
# prefixes only the first of the pieces it cuts at added tokens, so segments tokenized alone would differ.
FIRST_PIECE_ONLY = re.compile(r'"prepend_scheme"\s*:\s*"first"')
# Per entry, beyond its text's and ids' objects: the ordered dict's slot and links, the key tuple.
ENTRY_OVERHEAD = 256


def entry_size(key, ids):
    return sys.getsizeof(key[1]) + sys.getsizeof(ids) + ENTRY_OVERHEAD


class SegmentCache:
    """``(tokenizer digest, text)`` → its ids packed as SPEC 15.1 packs tokens; the least recently used go first,
    past ``max_bytes``."""

    def __init__(self, max_bytes):
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = self.misses = 0
        self._entries = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            ids = self._entries.get(key)
            if ids is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return ids

    def put(self, key, ids):
        size = entry_size(key, ids)
        if size > self.max_bytes:
            return
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = ids
            self.bytes += size
            while self.bytes > self.max_bytes:
                self.bytes -= entry_size(*self._entries.popitem(last=False))

    def __len__(self):
        return len(self._entries)

    def clear(self):
        with self._lock:
            self._entries.clear()
            self.bytes = 0


class Segmenter:
    """A tokenizer's texts cut at its added tokens, each segment's ids from the cache or tokenized once."""

    def __init__(self, tokenizer, digest, cache):
        self.tokenizer, self.digest, self.cache = tokenizer, digest, cache
        added = sorted(tokenizer.get_added_tokens_decoder().values(), key=lambda token: -len(token.content))
        # Each added token's id as packed bytes (SPEC 15.1's packing: 4 bytes little-endian).
        self.added_bytes = {token.content: token_bytes([tokenizer.token_to_id(token.content)]) for token in added}
        self.pattern = re.compile("|".join(re.escape(token.content) for token in added)) if added else None

    @classmethod
    def of(cls, tokenizer, digest, cache):
        """A segmenter for ``tokenizer`` when its whole texts are its segments' ids joined, else None."""
        added = list(tokenizer.get_added_tokens_decoder().values())
        if any(token.lstrip or token.rstrip or token.single_word or token.normalized for token in added):
            return None
        if FIRST_PIECE_ONLY.search(tokenizer.to_str()):
            return None
        segmenter = cls(tokenizer, digest, cache=None)
        words = [tokenizer.decode([n]) for n in range(min(tokenizer.get_vocab_size(), 64))]
        for sample in samples([token.content for token in added], words):
            if segmenter.ids(sample) != token_bytes(tokenizer.encode(sample, add_special_tokens=False).ids):
                return None
        segmenter.cache = cache
        return segmenter

    def ids(self, text):
        """The packed ids of ``text`` encoded without the special tokens a tokenizer adds around a text."""
        if self.pattern is None:
            return self._segment(text)
        out, at = [], 0
        for found in self.pattern.finditer(text):
            if found.start() > at:
                out.append(self._segment(text[at:found.start()]))
            out.append(self.added_bytes[found.group()])
            at = found.end()
        if at < len(text):
            out.append(self._segment(text[at:]))
        return b"".join(out)

    def _segment(self, text):
        cache = self.cache
        if cache is None or len(text) < MIN_CHARS:
            return self._encode(text)
        key = (self.digest, text)
        ids = cache.get(key)
        if ids is None:
            ids = self._encode(text)
            cache.put(key, ids)
        return ids

    def _encode(self, text):
        return token_bytes(self.tokenizer.encode(text, add_special_tokens=False).ids)


def samples(added, vocabulary=()):
    """Texts on which a segmenter must agree with the whole encoding: each added token at the start, middle and end
    of texts with spaces, newlines, non-ASCII and the tokenizer's own words beside it, and two in a row."""
    words = ["Hello world", " leading space", "trailing space ", "\nnew line\n", "  two  spaces", "héllo wörld ✓",
             "1234 5678", "tabs\tand\tmore", *(f"{a} {b}" for a, b in zip(vocabulary[::2], vocabulary[1::2]))]
    out = list(words)
    for token in added:
        for left, right in zip(words, words[1:] + words[:1]):
            out.append(f"{left}{token}{right}")
            out.append(f"{token}{left}{token}{token}{right}{token}")
    return out

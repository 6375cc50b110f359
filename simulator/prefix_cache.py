"""A simulated engine's prefix cache and how its changes reach the Proxy (SPEC 15; pure, no network, no clock).

``PrefixCache`` is one engine rank's cached prompt blocks, named by SPEC
15.1's keys (the simulated engine's block is the pool's ``B`` tokens, so an
engine block is one key, as the agent would key vLLM's ``BlockStored``
events): a request looks up the longest leading run of its prompt's keys it
holds (those tokens skip the prefill), then stores the prompt's blocks; at
capacity the least recently used blocks are evicted. Every store and eviction
is kept as a change until the publisher takes it, as the agent keeps the
events it has read until it sends them.

``PrefixPublisher`` turns an engine's changes into ``POST
/v1/instance/prefix_blocks`` bodies (15.3) exactly as the agent sends them:
a ``reset`` with the whole set first (and after the Proxy answers
``resync`` or ``unknown_instance``), ``seq`` + 1 a body within an epoch, a
new epoch at each reset, at most ``MAX_ITEMS`` keys a list (a large set is
one reset body followed by ordinary ones).
"""

from __future__ import annotations

from collections import OrderedDict

from agent.prefix_keys import DEFAULT_BLOCK_TOKENS

MAX_ITEMS = 16_384  # of ``added`` and of ``removed`` in one body (SPEC 15.3)
PUBLISH_EVERY_S = 0.25  # the agent sends its changes at most this often (SPEC 15.2)


class PrefixCache:
    """One engine rank's cached blocks (15.1 keys), least recently used first, and the changes not yet sent."""

    def __init__(self, capacity_blocks, block_tokens=DEFAULT_BLOCK_TOKENS):
        self.capacity = max(1, int(capacity_blocks))
        self.block_tokens = block_tokens
        self.blocks = OrderedDict()  # key -> None, least recently used first
        self.added, self.removed = set(), set()  # since the publisher last took them
        self.events_total = 0  # batches of events the engine published (stores, evictions, clears)
        self.last_event_ms = None
        self.hit_tokens = self.query_tokens = 0  # vLLM's prefix cache counters, for this cache's lookups
        self.cleared = False  # since the publisher last looked: its next send is a reset (AllBlocksCleared)

    def __len__(self):
        return len(self.blocks)

    def lookup(self, keys, prompt_tokens=None):
        """Tokens of the prompt the cache holds: its longest leading run of ``keys``, refreshed as used.

        As vLLM, at least the prompt's last token is computed: a prompt wholly
        cached counts ``prompt_tokens - 1`` cached tokens.
        """
        blocks = self.blocks
        hit = 0
        for key in keys:
            if key not in blocks:
                break
            blocks.move_to_end(key)
            hit += 1
        tokens = hit * self.block_tokens
        if prompt_tokens is not None:
            tokens = min(tokens, max(0, prompt_tokens - 1))
            self.query_tokens += prompt_tokens
            self.hit_tokens += tokens
        return tokens

    def store(self, keys, now_ms=None):
        """The engine computed these blocks: keep them (the most recent), evicting the oldest at capacity."""
        blocks, added, removed = self.blocks, self.added, self.removed
        changed = False
        for key in keys:
            if key in blocks:
                blocks.move_to_end(key)
                continue
            blocks[key] = None
            changed = True
            if key in removed:
                removed.discard(key)  # evicted and stored again since the last send: the Proxy's copy has it
            else:
                added.add(key)
        while len(blocks) > self.capacity:
            key, _ = blocks.popitem(last=False)
            if key in added:
                added.discard(key)  # stored and evicted since the last send: the Proxy never heard of it
            else:
                removed.add(key)
        if changed:
            self.events_total += 1
            self.last_event_ms = now_ms

    def clear(self, now_ms=None):
        """The engine restarted (or cleared its cache): nothing is cached, and the next send is a reset."""
        self.blocks.clear()
        self.added.clear()
        self.removed.clear()
        self.cleared = True
        self.events_total += 1
        self.last_event_ms = now_ms

    def take_changes(self):
        """``(added, removed)`` since the last call, sorted (deterministic bodies); forgets them."""
        added, removed = sorted(self.added), sorted(self.removed)
        self.added, self.removed = set(), set()
        return added, removed

    def kv_events(self, now_ms):
        """What the agent reports of this engine's events in its snapshot (SPEC 15.2's ``kv_events``)."""
        age = None if self.last_event_ms is None or now_ms is None else max(0, int(now_ms - self.last_event_ms))
        return {"status": "ok", "error": None,  # its publisher is read (a quiet one is still ok)
                "resident_blocks": len(self.blocks), "events_total": self.events_total, "gaps_total": 0,
                "last_event_age_ms": age, "block_tokens": self.block_tokens}


class PrefixPublisher:
    """One engine's side of ``POST /v1/instance/prefix_blocks``: the bodies to send, what the answers say."""

    def __init__(self, instance_id, engine, cache: PrefixCache, epoch=0):
        self.instance_id = instance_id
        self.engine = engine
        self.cache = cache
        self.epoch = epoch
        self.seq = -1
        self.needs_reset = True  # the agent's first send is its whole set
        self.resets = self.resyncs = 0

    def bodies(self):
        """The bodies to send now, in order (none when nothing changed); each goes after the one before."""
        cache = self.cache
        if cache.cleared:
            cache.cleared = False
            self.needs_reset = True
        if self.needs_reset:
            self.needs_reset = False
            cache.take_changes()  # the reset carries the whole set: the changes are in it
            self.epoch += 1
            self.seq = -1
            self.resets += 1
            keys = list(cache.blocks)
            out = [self._body(keys[:MAX_ITEMS], [], reset=True)]
            for start in range(MAX_ITEMS, len(keys), MAX_ITEMS):
                out.append(self._body(keys[start:start + MAX_ITEMS], []))
            return out
        added, removed = cache.take_changes()
        out = []
        for start in range(0, max(len(added), len(removed)), MAX_ITEMS):
            out.append(self._body(added[start:start + MAX_ITEMS], removed[start:start + MAX_ITEMS]))
        return out

    def _body(self, added, removed, reset=False):
        self.seq += 1
        return {"instance_id": self.instance_id, "engine": self.engine, "epoch": self.epoch, "seq": self.seq,
                "block_tokens": self.cache.block_tokens, "reset": reset, "added": added, "removed": removed}

    def answered(self, status, data):
        """The Proxy's answer to a body: True when it took it; otherwise the next send is a reset.

        ``resync`` (the Proxy cannot vouch for its copy), ``unknown_instance``
        (not registered yet, or expired: the driver registers it again) and
        any failure all end the same way: the whole set, as a reset, next time.
        """
        ok = status == 200 and isinstance(data, dict) and data.get("ok") is True
        if ok and data.get("resync") is True:
            self.resyncs += 1
            self.needs_reset = True
        elif not ok:
            self.needs_reset = True
        return ok

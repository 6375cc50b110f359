"""One engine rank's resident prompt blocks, keyed by SPEC 15.1, and the changes not yet sent (SPEC 15.2).

The engine names its blocks by its own hashes and block size; the pool names
them by 15.1's keys of ``B`` tokens. A stored engine block of ``k × B``
tokens gives ``k`` keys chained from its parent's last key (or the model's
seed when it has no parent), so the set keeps, per engine hash, the keys it
gave: one int for the common single-key block, a tuple otherwise, which is
also what makes a removal cheap. A block whose parent the set does not know
(stored before the agent started, skipped, or lost in a gap) cannot be keyed:
it and its descendants are skipped and counted.

Indexed: the device tier (``medium`` null or ``"GPU"``; vLLM's CPU build
publishes "GPU" too, its KV cache being its device memory), the first KV-cache
group (``group_idx`` null or 0: hybrid models publish one store per group of
the same tokens), and blocks without ``extra_keys`` beyond the adapter's name
(multimodal inputs, a cache salt or prompt embeddings make the engine's block
differ from the tokens' block; 15.1's seed already covers the adapter). An engine
block size that is not a multiple of ``B`` cannot be re-chunked: nothing is
indexed and the status says ``block_size_mismatch``.

Changes since the last ``drain`` are kept as two sets that cancel (a key
stored and removed between two reports is never sent); ``AllBlocksCleared``,
a new model, or a failed report asks for a reset: the whole set is sent again
under a new epoch. While a reset is due no changes are kept, so an agent that
does not report (or cannot, for long) holds the set and nothing more.
"""

from __future__ import annotations

import threading

from agent.engines.kv_events import Cleared, Removed, Stored
from agent.prefix_keys import chain_keys, seed_of

DEVICE_MEDIA = (None, "GPU")


class ResidentSet:
    """Thread-safe: the subscriber applies events, the prefix reporter drains, the sampler reads figures."""

    def __init__(self, block_tokens: int):
        self.block_tokens = block_tokens
        self._lock = threading.Lock()
        self._blocks: dict = {}  # engine block hash -> key (int) or keys (tuple)
        self._keys = 0
        self._added: set = set()
        self._removed: set = set()
        self._reset_pending = True  # the Proxy has not got this set yet
        self.skipped_blocks = 0
        self.block_size_mismatch = None  # the engine's block size when it is not a multiple of B
        self._seeds: dict = {}

    # --- applying events (subscriber thread) ------------------------------------

    def apply(self, events, model: str):
        """Apply one batch's events; ``model`` names 15.1's seed (with each stored block's adapter, if any)."""
        with self._lock:
            for event in events:
                if isinstance(event, Stored):
                    self._store(event, model)
                elif isinstance(event, Removed):
                    if event.medium in DEVICE_MEDIA and event.group_idx in (None, 0):
                        self._drop(event.block_hashes)
                elif isinstance(event, Cleared):
                    self._clear()

    def clear(self):
        with self._lock:
            self._clear()

    def _clear(self):
        self._blocks.clear()
        self._keys = 0
        self._added.clear()
        self._removed.clear()
        self._reset_pending = True

    def _store(self, event: Stored, model: str):
        if event.medium not in DEVICE_MEDIA or event.group_idx not in (None, 0):
            return
        size, width = event.block_size, self.block_tokens
        if size % width:
            self.block_size_mismatch = size
            self.skipped_blocks += len(event.block_hashes)
            return
        self.block_size_mismatch = None
        parent = event.parent_block_hash
        if parent is None:
            previous = self._seed(model, event.lora_name)
        else:
            known = self._blocks.get(parent)
            if known is None:
                self.skipped_blocks += len(event.block_hashes)
                return
            previous = known if isinstance(known, int) else known[-1]
        hashes = event.block_hashes
        usable = min(len(hashes), len(event.token_ids) // size)  # a partial block has no key
        extra = event.extra_keys
        if isinstance(extra, list):
            for n in range(min(usable, len(extra))):
                if not _only_adapter(extra[n], event.lora_name):
                    usable = n  # keyed by more than its tokens: it and its descendants are unkeyable
                    break
        self.skipped_blocks += len(hashes) - usable
        if not usable:
            return
        # One chain over the event's blocks (each continues the one before), split per engine block.
        keys = chain_keys(previous, event.token_ids[:usable * size], width)
        per_block = size // width
        blocks, new = self._blocks, []
        try:
            if per_block == 1:
                # The common case (the engine's block is the pool's): one key a block, held as a bare int. A
                # thousand blocks a second pass here, so no tuple and no inner loop per block (issue 32's agent
                # cost).
                for block_hash, key in zip(hashes, keys):  # keys: one per usable block
                    if block_hash not in blocks:  # else stored again (vLLM re-announces a block): counted already
                        blocks[block_hash] = key
                        new.append(key)
            else:
                for n in range(usable):
                    if hashes[n] not in blocks:
                        mine = blocks[hashes[n]] = tuple(keys[n * per_block:(n + 1) * per_block])
                        new.extend(mine)
        finally:  # an unhashable block hash stops the loop (the subscriber counts it): what was stored counts
            self._keys += len(new)
            self._note(new, self._removed, self._added)

    def _seed(self, model, adapter):
        seed = self._seeds.get((model, adapter))
        if seed is None:
            if len(self._seeds) > 256:  # adapters come and go; the seeds are cheap to compute again
                self._seeds.clear()
            seed = self._seeds[(model, adapter)] = seed_of(model, adapter)
        return seed

    def _drop(self, block_hashes):
        blocks, gone = self._blocks, []
        try:
            for block_hash in block_hashes:
                known = blocks.pop(block_hash, None)
                if known.__class__ is int:  # one key (the common case): no tuple
                    gone.append(known)
                elif known is not None:
                    gone.extend(known)
        finally:  # as in _store: an unhashable hash stops the loop, what was dropped counts
            self._keys -= len(gone)
            self._note(gone, self._added, self._removed)

    def _note(self, keys, opposite, changes):
        """Keep ``keys`` as changes since the last drain: each cancels its opposite change (a key removed and
        stored again between two reports is sent as neither), the rest join ``changes``. Nothing is kept while
        a reset is due: the whole set goes then."""
        if self._reset_pending or not keys:
            return
        cancelled = opposite.intersection(keys) if opposite else ()
        if cancelled:
            opposite -= cancelled
            changes.update(key for key in keys if key not in cancelled)
        else:
            changes.update(keys)

    # --- reading (sampler, prefix reporter) -------------------------------------------

    @property
    def resident_blocks(self) -> int:
        return len(self._blocks)

    @property
    def resident_keys(self) -> int:
        return self._keys

    def keys(self) -> list[int]:
        """Every resident key (tests, resets)."""
        with self._lock:
            return self._all_keys()

    def _all_keys(self):
        out = []
        for known in self._blocks.values():
            if isinstance(known, int):
                out.append(known)
            else:
                out.extend(known)
        return out

    def has_changes(self) -> bool:
        with self._lock:
            return self._reset_pending or bool(self._added) or bool(self._removed)

    @property
    def reset_pending(self) -> bool:
        """The whole set goes next (a reset is sent without waiting for the prefix reporter's interval)."""
        return self._reset_pending

    def request_reset(self):
        """Send the whole set next time (the Proxy asked for it, a report failed, or it is time)."""
        with self._lock:
            self._reset_pending = True
            self._added.clear()  # the whole set goes: changes need not be kept until then
            self._removed.clear()

    def drain(self):
        """``(reset, added, removed)`` since the last drain: the whole set when a reset is due, else the changes."""
        with self._lock:
            if self._reset_pending:
                self._reset_pending = False
                self._added.clear()
                self._removed.clear()
                return True, self._all_keys(), []
            added, removed = list(self._added), list(self._removed)
            self._added.clear()
            self._removed.clear()
            return False, added, removed



def _only_adapter(extra, lora_name) -> bool:
    """A block's ``extra_keys`` entry that says no more than its adapter (vLLM puts the LoRA name first)."""
    return extra is None or (lora_name is not None and list(extra) == [lora_name])

"""The resident set's changes between two drains are exactly what the set gained and lost (SPEC 15.2, 15.3).

Whatever order the engine stores, re-announces and removes blocks in, the
Proxy's copy, kept from the resets and the deltas the agent drains, must
equal the agent's own set at each drain.
"""

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.engines.kv_events import Cleared, Removed, Stored
from agent.engines.kv_index import ResidentSet

MODEL = "tiny-llama"
B = 16


def tokens_of(block_hash, size):
    """Tokens no other engine block has: equal tokens under an equal parent would be the same block."""
    return [(block_hash * 7 + n) % 512 for n in range(size)]


stored_step = st.tuples(st.just("stored"), st.lists(st.integers(1, 60), min_size=1, max_size=6, unique=True),
                        st.integers(0, 60), st.sampled_from([B, 2 * B]))
removed_step = st.tuples(st.just("removed"), st.lists(st.integers(1, 60), max_size=8))
other_step = st.sampled_from([("drain",), ("reset",), ("cleared",)])
steps = st.lists(st.one_of(stored_step, stored_step, removed_step, other_step), max_size=40)


def event_of(step):
    if step[0] == "stored":
        _, hashes, parent, size = step
        tokens = [token for block_hash in hashes for token in tokens_of(block_hash, size)]
        return Stored(hashes, parent or None, tokens, size, None, "GPU", None, None)
    if step[0] == "removed":
        return Removed(step[1], None, None)
    return Cleared()


@settings(max_examples=150, deadline=None)
@given(steps)
def test_the_drained_changes_rebuild_the_agents_set(script):
    blocks = ResidentSet(B)
    copy = set()  # what the Proxy holds from the drained bodies
    for step in [*script, ("drain",)]:
        if step[0] == "reset":
            blocks.request_reset()
        elif step[0] == "drain":
            reset, added, removed = blocks.drain()
            if reset:
                copy.clear()
            assert not copy.intersection(added) and copy.issuperset(removed)
            copy.update(added)
            copy.difference_update(removed)
            assert copy == set(blocks.keys())
        else:
            blocks.apply([event_of(step)], MODEL)
        assert blocks.resident_keys == len(blocks.keys())


def test_an_unusable_block_hash_stops_the_event_and_leaves_the_count_true():
    # Hashes are taken as published (kv_events.block_hashes); one that cannot key a dict stops the event where
    # it stands, and the subscriber counts the event as bad. What was applied before it stays, counted.
    for size in (B, 2 * B):
        blocks = ResidentSet(B)
        tokens = [token for block_hash in (1, 2, 3) for token in tokens_of(block_hash, size)]
        try:
            blocks.apply([Stored([1, [2], 3], None, tokens, size, None, "GPU", None, None)], MODEL)
        except TypeError:
            pass
        assert blocks.resident_blocks == 1 and blocks.resident_keys == len(blocks.keys()) == size // B
        try:
            blocks.apply([Removed([1, [2]], None, None)], MODEL)
        except TypeError:
            pass
        assert blocks.resident_blocks == 0 and blocks.resident_keys == len(blocks.keys()) == 0

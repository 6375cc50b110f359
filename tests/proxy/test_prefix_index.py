"""The pool prefix index in one process's memory (SPEC 15.4): pure, against a plain model of sets."""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from proxy_app.prefix import index as index_module
from proxy_app.prefix.index import LearnedIndex, PrefixIndex, leading_runs


def model_hits(sets, owners, prompt):
    """What ``hits`` must answer, from {stream: set of keys}."""
    answer = {}
    for stream, keys in sets.items():
        run = 0
        while run < len(prompt) and prompt[run] in keys:
            run += 1
        if run:
            answer[owners[stream]] = max(run, answer.get(owners[stream], 0))
    return answer


def test_it_answers_each_instance_s_leading_run_across_its_engines():
    index = PrefixIndex()
    index.apply(1, "a", added=[10, 11, 12])
    index.apply(2, "a", added=[10, 11, 12, 13])  # a second engine of a
    index.apply(3, "b", added=[10, 12, 13])  # a gap after the first block
    assert index.hits([10, 11, 12, 13, 14]) == {"a": 4, "b": 1}
    assert index.hits([11, 12]) == {"a": 2}
    assert index.hits([99]) == {}


def test_a_reset_or_a_drop_forgets_a_stream_before_and_after_a_merge():
    index = PrefixIndex()
    index.apply(1, "a", added=[1, 2, 3])
    index.merge()
    index.apply(1, "a", added=[7], reset=True)
    assert index.hits([1]) == {} and index.hits([7]) == {"a": 1}
    index.drop(1)
    assert index.hits([7]) == {}
    index.merge()
    assert len(index.keys) == 0 and index.owner == []


def test_it_loads_a_whole_table_at_once():
    index = PrefixIndex()
    index.load([(40, "a"), (41, "b")], np.array([0, 0, 1, 1]), np.array([5, 6, 5, 9]))
    assert index.hits([5, 6]) == {"a": 2, "b": 1}
    index.apply(41, "b", added=[6])
    assert index.hits([5, 6]) == {"a": 2, "b": 2}


def test_it_removes_a_key_held_in_the_columns_and_one_held_in_the_delta():
    index = PrefixIndex()
    index.apply(1, "a", added=[1, 2, 3])
    index.merge()
    index.apply(1, "a", added=[4], removed=[2])
    assert index.hits([1, 2, 3]) == {"a": 1}
    index.apply(1, "a", removed=[4], added=[2])
    assert index.hits([1, 2, 3, 4]) == {"a": 3}
    index.merge()
    assert index.hits([1, 2, 3, 4]) == {"a": 3}


def test_leading_runs_counts_from_the_first_position_without_a_gap():
    positions = np.array([0, 1, 2, 0, 2, 1, 0, 0])
    slots = np.array([5, 5, 5, 6, 6, 7, 8, 8])
    assert leading_runs(positions, slots, 3) == {5: 3, 6: 1, 8: 1}


def test_it_holds_a_key_in_twelve_bytes_once_merged():
    index = PrefixIndex()
    for stream in range(100):
        index.apply(stream, f"i-{stream}", added=range(stream * 1000, stream * 1000 + 1000))
    index.merge()
    assert len(index) == 100_000
    assert index.keys.nbytes + index.slots.nbytes == 12 * 100_000
    assert index.nbytes() / len(index) < 16


OPS = st.lists(st.tuples(st.sampled_from(["add", "remove", "reset", "drop", "merge"]), st.integers(0, 3),
                         st.lists(st.integers(0, 9), max_size=6)), max_size=40)


def test_its_lookup_is_built_in_c_by_the_install():
    from proxy_app.prefix import _runs

    assert index_module.compiled_runs is _runs.leading_runs


# The lookup runs in C where the install built it (proxy_app/prefix/_runs.c), else in numpy: both answer as the model.
@pytest.mark.parametrize("lookup", ["c", "numpy"])
@settings(max_examples=150, deadline=None)
@given(OPS, st.lists(st.integers(0, 9), min_size=0, max_size=6))
# A key the base holds, added again and then removed: it is gone (the removal took only the delta's pair once).
@example(ops=[("add", 0, [0, 0]), ("add", 0, [0] * 6), ("add", 0, [0]), ("remove", 0, [0])], prompt=[0])
@example(ops=[("add", 0, [0, 1])], prompt=[])  # the numpy walk raised on an empty prompt where C answers {}
@example(ops=[("add", 0, [0, 1]), ("merge", 0, [])], prompt=[])
@example(ops=[("add", 0, [0, 1]), ("merge", 0, [])], prompt=[0])
@example(ops=[("add", 0, [0, 1])], prompt=[5])
def test_it_answers_what_a_model_of_sets_answers_through_any_changes(lookup, ops, prompt):
    saved = index_module.MERGE_MIN, index_module.FIRST_CHUNK, index_module.compiled_runs
    index_module.MERGE_MIN = 8  # merges happen within the example
    index_module.FIRST_CHUNK = 2  # the lookup searches the prompt in chunks of 2, 8, … (runs cross chunks)
    if lookup == "numpy":
        index_module.compiled_runs = None
    try:
        index, sets, owners = PrefixIndex(), {}, {stream: f"i-{stream % 2}" for stream in range(4)}
        for op, stream, keys in ops:
            if op == "add":
                index.apply(stream, owners[stream], added=keys)
                sets.setdefault(stream, set()).update(keys)
            elif op == "remove":
                index.apply(stream, owners[stream], removed=keys)
                sets.setdefault(stream, set()).difference_update(keys)
            elif op == "reset":
                index.apply(stream, owners[stream], added=keys, reset=True)
                sets[stream] = set(keys)
            elif op == "drop":
                index.drop(stream)
                sets.pop(stream, None)
            else:
                index.merge()
            assert index.hits(prompt) == model_hits(sets, owners, prompt)
    finally:
        index_module.MERGE_MIN, index_module.FIRST_CHUNK, index_module.compiled_runs = saved


@pytest.mark.parametrize("prompt", [[], [1], [7], [1, 2]])
@pytest.mark.parametrize("merged", [False, True])
def test_its_c_and_numpy_walks_answer_alike_on_empty_and_one_item_queries(prompt, merged):
    index = PrefixIndex()
    index.apply(0, "i-0", added=[1, 2])
    index.apply(1, "i-1", added=[1])
    if merged:
        index.merge()
    compiled = index_module.compiled_runs(index.keys, index.slots, index.dead, prompt, index.added, index.removed)
    assert index.numpy_runs(prompt) == compiled


def test_learned_records_expire_and_leave_with_their_instance():
    learned = LearnedIndex()
    learned.record("a", [1, 2, 3], expires_at=100.0)
    learned.record("b", [1, 2], expires_at=50.0)
    assert learned.hits([1, 2, 3], now=10.0) == {"a": 3, "b": 2}
    assert learned.hits([1, 2, 3], now=60.0) == {"a": 3}
    learned.sweep(now=60.0)
    learned.drop("a")
    assert learned.hits([1, 2, 3], now=60.0) == {} and len(learned) == 3
    learned.sweep(now=200.0)
    assert len(learned) == 0


def test_a_key_both_added_and_removed_by_one_body_is_not_held_as_the_store_applies_it():
    # The store inserts a body's added keys, then deletes its removed ones (proxy_app/prefix/store.py): the copy
    # in memory ends the same, whether the key was new or held already.
    index = PrefixIndex()
    index.apply(0, "i-0", added=[7])
    index.merge()
    index.apply(0, "i-0", added=[5, 7], removed=[5, 7])
    assert index.hits([5]) == {} and index.hits([7]) == {}
    index.merge()
    assert index.hits([5]) == {} and index.hits([7]) == {}

"""The segment cache is never wrong (SPEC 16.3): a chat's ids through cached segments equal its whole render
tokenized at once, on random conversations, whatever the cache holds or has dropped; and it keeps to its bound."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy_app.tokenizers.segments import MIN_CHARS, SegmentCache, Segmenter, entry_size
from tests.tokenizers import TINY_MODEL_DIR, TinyTokenizer, ids_of

SPECIAL = ["<s>", "</s>", "<|im_start|>", "<|im_end|>"]
texts = st.lists(st.sampled_from(list("ab cdé\n\t✓日") + ["hello", "  ", " world", *SPECIAL]), max_size=60).map("".join)
messages = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant"]),
                                           "content": texts}), min_size=1, max_size=6)

SMALL = TinyTokenizer(cache_bytes=4096)  # so small that entries come and go as the examples run
LARGE = TinyTokenizer()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages, st.booleans())
def test_cached_segments_join_to_the_whole_render_s_ids(conversation, generation_prompt):
    for tokenizer in (SMALL, LARGE):
        body = tokenizer.chat_body({"messages": conversation, "add_generation_prompt": generation_prompt})
        whole = tokenizer.loaded.tokenizer.encode(tokenizer.render(body), add_special_tokens=False).ids
        assert tokenizer.chat_ids(body) == whole
        assert tokenizer.chat_ids(body) == whole  # again, from the cache


@settings(max_examples=200, deadline=None)
@given(texts, st.booleans())
def test_a_prompt_s_ids_equal_the_tokenizer_s_with_or_without_its_special_tokens(text, special):
    expected = LARGE.loaded.tokenizer.encode(text, add_special_tokens=special).ids
    assert ids_of(LARGE.loaded.prompt_ids(text, special)) == expected


def test_the_cache_keeps_to_its_bound_and_drops_the_least_recently_used():
    cache = SegmentCache(max_bytes=3 * entry_size(("d", "0" * 100), b"x" * 40))
    for n in range(3):
        cache.put(("d", str(n) * 100), b"x" * 40)
    cache.get(("d", "0" * 100))
    cache.put(("d", "3" * 100), b"x" * 40)
    assert cache.bytes <= cache.max_bytes and len(cache) == 3
    assert cache.get(("d", "1" * 100)) is None and cache.get(("d", "0" * 100)) is not None


def test_short_segments_are_not_kept():
    tokenizer = TinyTokenizer()
    tokenizer.prompt_ids("x" * (MIN_CHARS - 1))
    assert len(tokenizer.loaded.segmenter.cache) == 0
    tokenizer.prompt_ids("x" * MIN_CHARS)
    assert len(tokenizer.loaded.segmenter.cache) == 1


def test_a_tokenizer_whose_segments_would_differ_is_tokenized_whole(tmp_path):
    """A Metaspace pre-tokenizer that prefixes only a text's first piece: segments cut at added tokens would each
    get the prefix, so the check on sample texts turns the cache off for it, and the ids stay right."""
    import json

    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "▁a": 1, "a": 2, "<x>": 3, "▁": 4}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    tokenizer.add_special_tokens(["<x>"])
    assert Segmenter.of(tokenizer, b"d", SegmentCache(1 << 20)) is None
    (tmp_path / "tokenizer.json").write_text(tokenizer.to_str())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages[0].content }}"}))
    loaded = TinyTokenizer(directory=tmp_path)
    body = {"messages": [{"role": "user", "content": "a<x>a a"}]}
    assert loaded.chat_ids(body) == tokenizer.encode("a<x>a a", add_special_tokens=False).ids


def test_the_tests_tokenizer_is_the_one_shipped():
    assert (TINY_MODEL_DIR / "tokenizer.json").exists() and LARGE.loaded.segmenter is not None

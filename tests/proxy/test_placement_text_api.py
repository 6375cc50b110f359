"""``POST /v1/placement`` with a prompt as text or as a chat (SPEC 16.3, 16.4), through both entry points and on
both databases, with the tests' tiny tokenizer named by the operator's map (``FLEETWATCH_TOKENIZERS``)."""

import json
import time

import pytest

from agent.prefix_keys import prompt_keys
from proxy_app.tokenizers.loaded import FILE_NAMES
from tests.factories import T0_MS, make_engine, make_snapshot
from tests.tokenizers import TINY_MODEL_DIR, tiny_tokenizer

pytestmark = [pytest.mark.django_db, pytest.mark.both_entry_points]

EVENTS_OK = {"status": "ok", "error": None, "resident_blocks": 0, "events_total": 0, "gaps_total": 0,
             "last_event_age_ms": 10, "block_tokens": 16}
SYSTEM = "You are a helpful assistant. Answer the question in one short paragraph. " * 8
CHAT = {"model": "tiny", "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hi!"}]}
TEXT = {"model": "tiny", "prompt": SYSTEM}


@pytest.fixture
def operator_map(settings):
    settings.FLEETWATCH_TOKENIZERS = {"tiny": str(TINY_MODEL_DIR)}


@pytest.fixture
def serving(register_instance, report, frozen):
    def _serving(instance_id, host="10.0.0.1", waiting=0):
        register_instance(instance_id, host=host)
        engine = make_engine(requests_waiting=waiting, kv_cache_usage_ratio=0.1, scraped_at_ms=T0_MS,
                             kv_events=EVENTS_OK)
        assert report(instance_id, make_snapshot(engines=[engine])).status_code == 200
    return _serving


def holds(api, instance_id, keys):
    answer = api.post("/v1/instance/prefix_blocks", {"instance_id": instance_id, "engine": "e0", "epoch": 1,
                                                     "seq": 0, "block_tokens": 16, "reset": True,
                                                     "added": list(keys)})
    assert answer.json() == {"ok": True, "resync": False}


def keys_of(ids):
    """The keys placement computes for a text or chat prompt: all but its last token."""
    return prompt_keys("tiny", ids[:-1], 16)


def test_a_chat_is_keyed_by_the_engine_s_own_ids_and_finds_the_instance_holding_them(api, serving, operator_map):
    tokenizer = tiny_tokenizer()
    ids = tokenizer.chat_ids(CHAT)
    serving("cold")
    serving("warm", host="10.0.0.2", waiting=1)
    holds(api, "warm", keys_of(ids)[:5])
    answer = api.post("/v1/placement", CHAT).json()
    assert [c["instance_id"] for c in answer["candidates"]] == ["warm", "cold"]
    assert answer["candidates"][0]["prefix_hit_tokens"] == 80
    assert answer["prompt_tokens"] == len(ids)
    assert answer["prompt_blocks"] == (len(ids) - 1) // 16
    assert answer["tokenizer"] == {"source": "operator", "sha256": tokenizer.sha256}
    assert (answer["prompt_error"], answer["prefix_source"]) == (None, "events")


def test_a_text_prompt_is_tokenized_with_the_special_tokens_the_tokenizer_adds(api, serving, operator_map):
    ids = tiny_tokenizer().prompt_ids(SYSTEM)
    assert ids[0] == 1  # <s>
    serving("a")
    holds(api, "a", keys_of(ids))
    answer = api.post("/v1/placement", TEXT).json()
    assert answer["candidates"][0]["prefix_hit_blocks"] == (len(ids) - 1) // 16
    assert answer["prompt_tokens"] == len(ids)


def test_a_prompt_of_token_ids_or_a_batch_is_keyed_by_its_first_item(api, serving):
    serving("a")
    ids = list(range(40))
    holds(api, "a", keys_of(ids))
    for prompt in (ids, [ids, [5, 5]]):
        answer = api.post("/v1/placement", {"model": "tiny", "prompt": prompt}).json()
        assert answer["candidates"][0]["prefix_hit_blocks"] == 2
        assert (answer["prompt_tokens"], answer["tokenizer"], answer["prompt_error"]) == (40, None, None)


def test_a_client_s_openai_body_is_a_placement_body_as_it_stands(api, serving, operator_map):
    serving("a")
    body = {**CHAT, "stream": True, "stream_options": {"include_usage": True}, "temperature": 0.2, "max_tokens": 64,
            "n": 1, "user": "someone", "tool_choice": "auto", "response_format": {"type": "text"}}
    answer = api.post("/v1/placement", body)
    assert answer.status_code == 200 and answer.json()["verdict"] == "accept"
    assert answer.json()["prompt_error"] is None


def test_today_s_bodies_are_answered_without_the_text_prompt_keys(api, serving):
    serving("a")
    for body in ({"model": "tiny"}, {"model": "tiny", "prompt_token_ids": list(range(40))}, {}):
        answer = api.post("/v1/placement", body).json()
        assert not {"prompt_tokens", "tokenizer", "prompt_error"} & answer.keys()


@pytest.mark.parametrize(("setting", "error"), [
    (None, "no_tokenizer"),
    ("{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}", "template_timeout"),
    ("{{ raise_exception('no system prompt allowed') }}", "template_error"),
    ("{% for m in messages %}{{ m.content ", "template_error"),
])
def test_a_prompt_that_cannot_be_keyed_is_placed_by_load_and_says_why(api, serving, settings, tmp_path, setting,
                                                                      error):
    serving("a")
    if setting is not None:
        for name in FILE_NAMES:
            if (TINY_MODEL_DIR / name).exists():
                (tmp_path / name).write_bytes((TINY_MODEL_DIR / name).read_bytes())
        (tmp_path / "chat_template.jinja").write_text(setting)
        settings.FLEETWATCH_TOKENIZERS = {"tiny": str(tmp_path)}
    started = time.monotonic()
    answer = api.post("/v1/placement", CHAT)
    assert time.monotonic() - started < 2.0  # the 50 ms bound, with room for a loaded machine
    body = answer.json()
    assert (answer.status_code, body["verdict"], body["prompt_error"]) == (200, "accept", error)
    assert (body["prefix_source"], body["prompt_tokens"], body["candidates"][0]["instance_id"]) == (None, None, "a")


def test_garbage_tokenizer_files_are_no_tokenizer(api, serving, settings, tmp_path):
    serving("a")
    (tmp_path / "tokenizer.json").write_bytes(b"\x00 not a tokenizer")
    settings.FLEETWATCH_TOKENIZERS = {"tiny": str(tmp_path)}
    assert api.post("/v1/placement", TEXT).json()["prompt_error"] == "no_tokenizer"


def test_a_part_that_is_not_text_is_non_text(api, serving, operator_map):
    serving("a")
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    body = {"model": "tiny", "messages": [{"role": "user", "content": [{"type": "text", "text": "see"}, image]}]}
    answer = api.post("/v1/placement", body).json()
    assert (answer["prompt_error"], answer["verdict"]) == ("non_text", "accept")


@pytest.mark.parametrize(("body", "field"), [
    ({"model": "tiny", "messages": "hello"}, "messages"),
    ({"model": "tiny", "messages": [{"content": "no role"}]}, "messages"),
    ({"model": "tiny", "messages": [{"role": "user", "content": 42}]}, "messages"),
    ({"model": "tiny", "messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}]}, "messages"),
    ({"model": "tiny", "messages": []}, "messages"),
    ({"model": "tiny", "prompt": "a", "messages": [{"role": "user", "content": "b"}]}, "messages"),
    ({"model": "tiny", "prompt": "a", "prompt_token_ids": [1, 2]}, "prompt"),
    ({"prompt": "no model"}, "model"),
    ({"model": "tiny", "prompt": 42}, "prompt"),
    ({"model": "tiny", "prompt": []}, "prompt"),
    ({"model": "tiny", "prompt": ["a", [1]]}, "prompt"),
    ({"model": "tiny", "prompt": [1, -1]}, "prompt"),
    ({**CHAT, "add_generation_prompt": "yes"}, "add_generation_prompt"),
    ({**CHAT, "continue_final_message": True}, "continue_final_message"),
    ({**CHAT, "chat_template_kwargs": [1]}, "chat_template_kwargs"),
    ({**CHAT, "tools": {"a": 1}}, "tools"),
])
def test_malformed_text_and_chat_bodies_are_400_naming_the_field(api, serving, operator_map, body, field):
    serving("a")
    answer = api.post("/v1/placement", body)
    assert answer.status_code == 400, answer.content
    assert answer.json()["error"] == "validation_error" and field in answer.json()["detail"], answer.json()


def test_continue_final_message_keys_the_render_cut_after_the_final_message(api, serving, operator_map):
    body = {**CHAT, "messages": [*CHAT["messages"], {"role": "assistant", "content": "Hello, I"}],
            "add_generation_prompt": False, "continue_final_message": True}
    ids = tiny_tokenizer().chat_ids(body)
    assert tiny_tokenizer().render(body).endswith("Hello, I")
    answer = api.post("/v1/placement", body).json()
    assert answer["prompt_tokens"] == len(ids)


def test_the_body_is_read_as_json_with_non_ascii_text(api, serving, operator_map):
    serving("a")
    body = json.loads(json.dumps({"model": "tiny", "prompt": "Über — ✓ 日本語"}, ensure_ascii=True))
    answer = api.post("/v1/placement", body).json()
    assert answer["prompt_tokens"] == len(tiny_tokenizer().prompt_ids("Über — ✓ 日本語"))


def test_a_tokenizer_that_fails_on_some_text_places_by_load(api, serving, settings, tmp_path):
    """A word-level tokenizer without an unknown token raises on any word it lacks: never a 5xx."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"hello": 0, "world": 1}))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    (tmp_path / "tokenizer.json").write_text(tokenizer.to_str())
    settings.FLEETWATCH_TOKENIZERS = {"tiny": str(tmp_path)}
    serving("a")
    answer = api.post("/v1/placement", {"model": "tiny", "prompt": "hello stranger"})
    assert (answer.status_code, answer.json()["prompt_error"], answer.json()["verdict"]) == \
        (200, "no_tokenizer", "accept")

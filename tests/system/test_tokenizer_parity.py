"""The Proxy's ids for a text or chat prompt equal the engine's own (SPEC 16.3): 240 generated bodies, each
tokenized by the Proxy's path (the placement body checked, then ``read_prompt`` with the tests' tokenizer named by
the operator's map) and by a real vLLM's ``POST /tokenize`` serving the same tokenizer files.

The bodies cover long and empty contents, non-ASCII text, several turns, content as a list of text parts,
``add_generation_prompt`` false, ``continue_final_message``, ``tools``, special tokens written in the text, and
plain prompts with and without the special tokens the tokenizer adds.
"""

import random

import pytest
import requests

from proxy_app.api.serializers import PLACEMENT_BODY
from proxy_app.tokenizers.prompts import read_prompt
from proxy_app.tokenizers.registry import TokenizerRegistry
from tests.engines import SERVED_MODEL
from tests.tokenizers import TINY_MODEL_DIR, ids_of

pytestmark = pytest.mark.live

BODIES = 240
WORDS = ["the", "quick", "brown", "fox", "assistant", "question", "Fleetwatch", "cache", "prefix", "héllo", "wörld",
         "naïve", "日本語", "✓", "🙂", "Ünïcödé", "42", "3.14", "{\"a\": 1}", "def", "print('x')", "  ", "\n", "\t",
         "\n\n", " — ", "l'été", "Привет"]
SPECIAL = ["<s>", "</s>", "<|im_start|>", "<|im_end|>"]
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city, in °C",
                                         "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                        "required": ["city"]}}}


def text(rng, special=False):
    length = rng.choice([0, 1, 3, 12, 40, 200, 900])
    words = [rng.choice(WORDS) for _ in range(length)]
    if special and words:
        for _ in range(rng.randint(1, 3)):
            words.insert(rng.randrange(len(words) + 1), rng.choice(SPECIAL))
    return rng.choice(["", " "]).join(words)


def content(rng):
    if rng.random() < 0.25:
        return [{"type": "text", "text": text(rng)} for _ in range(rng.randint(1, 3))]
    return text(rng)


def chat_body(rng):
    roles = (["system"] if rng.random() < 0.5 else []) + ["user", "assistant"] * rng.randint(1, 3)
    roles = roles[:rng.randint(1, len(roles))]
    body = {"model": SERVED_MODEL, "messages": [{"role": role, "content": content(rng)} for role in roles]}
    if rng.random() < 0.25:
        body["tools"] = [TOOL] * rng.randint(1, 2)
    if roles[-1] == "assistant" and rng.random() < 0.5 and isinstance(body["messages"][-1]["content"], str) \
            and body["messages"][-1]["content"].strip():
        body.update(add_generation_prompt=False, continue_final_message=True)
    elif rng.random() < 0.3:
        body["add_generation_prompt"] = False
    return body


def prompt_body(rng):
    body = {"model": SERVED_MODEL, "prompt": text(rng, special=rng.random() < 0.3)}
    if rng.random() < 0.5:
        body["add_special_tokens"] = rng.random() < 0.5
    return body


def bodies():
    rng = random.Random(20261208)
    return [chat_body(rng) if n % 3 else prompt_body(rng) for n in range(BODIES)]


def test_the_proxy_s_ids_equal_the_engine_s_tokenize_for_every_generated_body(vllm_server, settings):
    settings.FLEETWATCH_TOKENIZERS = {SERVED_MODEL: str(TINY_MODEL_DIR)}
    registry = TokenizerRegistry()
    mismatched, kinds = [], set()
    session = requests.Session()
    for body in bodies():
        engine = session.post(vllm_server.url + "/tokenize", json=body, timeout=30)
        assert engine.status_code == 200, (body, engine.text)
        ours = read_prompt(PLACEMENT_BODY(body), SERVED_MODEL, registry)
        assert ours.error is None, (body, ours)
        if ids_of(ours.ids) != engine.json()["tokens"]:
            mismatched.append(body)
        kinds.add("chat" if "messages" in body else "prompt")
        kinds.update(key for key in ("tools", "continue_final_message", "add_special_tokens") if key in body)
        if "messages" in body:
            kinds.update("parts" for m in body["messages"] if isinstance(m["content"], list))
            kinds.update("turns" for _ in [0] if len(body["messages"]) > 2)
            kinds.update("no_generation_prompt" for _ in [0] if body.get("add_generation_prompt") is False)
    assert kinds >= {"chat", "prompt", "tools", "continue_final_message", "add_special_tokens", "parts", "turns",
                     "no_generation_prompt"}
    assert mismatched == [], f"{len(mismatched)} of {BODIES} differ from the engine; first: {mismatched[0]}"

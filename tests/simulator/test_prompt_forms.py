"""The routing benchmark's prompt forms (``--prompt-form``): the body of each, and for text and chat the keys the
simulated engines cache equal to what the Proxy computes of the same body (its placement API answers them)."""

import argparse

import pytest

from agent.prefix_keys import prompt_keys
from proxy_app.api.placement import placement_request
from proxy_app.api.serializers import PlacementSerializer
from simulator import cli, prompt_forms, routing
from simulator.cli import DEFAULT_TOKENIZER, ConfigError, routing_config
from simulator.prompts import NO_PREFIX, SHARED_PREFIX, PromptWorkload
from simulator.routing_run import RoutingConfig
from simulator.workload import MODEL, RoutedRequest, RoutingWorkload

TOKENIZER = prompt_forms.load_tokenizer(DEFAULT_TOKENIZER)


def stream(form, kind=SHARED_PREFIX, seed=3):
    turns = prompt_forms.turns_of(form, MODEL, tokenizer=TOKENIZER)
    return PromptWorkload(kind=kind).arrivals(MODEL, seed, 6.0, 20.0, turns)


def body(form, prompt, policy=routing.PLACEMENT):
    request = RoutedRequest(prompt, 20)
    return routing.placement_body(policy, MODEL, request.prompt_tokens, 20, 3, request.keys, (), form,
                                  request.content)


@pytest.fixture(scope="module")
def streams():
    return {form: stream(form) for form in prompt_forms.PROMPT_FORMS}


def test_every_form_has_the_same_sessions_times_and_about_the_same_lengths(streams):
    keys = streams["keys"]

    for form, other in streams.items():
        assert [(at, output) for at, _, output in other] == [(at, output) for at, _, output in keys], form
        mean = sum(prompt.tokens for _, prompt, _ in other) / len(other)
        assert 0.95 < mean / (sum(prompt.tokens for _, prompt, _ in keys) / len(keys)) < 1.05, form
    assert [prompt for _, prompt, _ in streams["ids"]] != [prompt for _, prompt, _ in keys]  # the ids kept
    assert [(p.tokens, p.keys, p.answer_keys) for _, p, _ in streams["ids"]] == [
        (p.tokens, p.keys, p.answer_keys) for _, p, _ in keys]


def test_keys_sends_the_keys_and_ids_the_token_ids_the_keys_are_of(streams):
    _, prompt, _ = streams["ids"][5]
    ids = body("ids", prompt)

    assert body("keys", streams["keys"][5][1]) == {"model": MODEL, "prompt_tokens": prompt.tokens, "max_tokens": 20,
                                                   "count": 3, "prompt_block_keys": list(prompt.keys)}
    assert set(ids) == {"model", "prompt_tokens", "max_tokens", "count", "prompt_token_ids"}
    assert len(ids["prompt_token_ids"]) == prompt.tokens
    assert tuple(prompt_keys(MODEL, ids["prompt_token_ids"])) == prompt.keys  # as the Proxy keys ids


def test_text_sends_the_prompt_and_chat_the_turn_as_messages(streams):
    later = next(prompt for _, prompt, _ in streams["chat"] if len(prompt.content) > 3)
    messages = body("chat", later)["messages"]
    text = body("text", streams["text"][0][1])

    assert isinstance(text["prompt"], str) and text["prompt"].endswith("\nAssistant:") and "\nUser: " in text["prompt"]
    assert [message["role"] for message in messages] == ["system", *["user", "assistant"] * (
        (len(messages) - 2) // 2), "user"]
    assert all(isinstance(message["content"], str) and message["content"] for message in messages)
    assert "prompt_block_keys" not in text and "prompt_block_keys" not in body("chat", later)
    assert set(body("chat", later, routing.PLACEMENT_LOAD)) == {"model", "prompt_tokens", "max_tokens", "count"}


def test_a_sessions_next_turn_starts_with_the_turn_and_its_answer(streams):
    for form in ("text", "chat"):
        prompts = [prompt for _, prompt, _ in streams[form]]
        followed = [b for a in prompts for b in prompts if a.answer_keys and len(b.keys) > len(a.keys)
                    and b.keys[:len(a.keys) + len(a.answer_keys)] == a.keys + a.answer_keys]
        assert followed, form
        assert len({prompt.keys[0] for prompt in prompts}) <= PromptWorkload().tenants  # the system prompts


def test_no_prefix_text_and_chat_share_nothing():
    for form in ("text", "chat"):
        keys = [key for _, prompt, _ in stream(form, NO_PREFIX) for key in prompt.keys]
        assert len(keys) == len(set(keys)), form


@pytest.mark.django_db
@pytest.mark.parametrize("form", ["text", "chat"])
def test_the_keys_the_engines_cache_are_the_ones_the_proxy_computes_of_the_body(settings, streams, form):
    settings.FLEETWATCH_TOKENIZERS = {MODEL: str(DEFAULT_TOKENIZER)}  # the registry is reset for every test
    for _, prompt, _ in streams[form][:12]:
        serializer = PlacementSerializer(data=body(form, prompt))
        assert serializer.is_valid(), serializer.errors
        request, read = placement_request(serializer.validated_data)

        assert read.error is None and read.tokenizer["sha256"] == TOKENIZER.sha256
        assert read.tokens == prompt.tokens
        assert request.prompt_keys == prompt.keys


# --- the command line ------------------------------------------------------------------------


def parsed(*argv):
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return vars(parser.parse_args(["--routing-benchmark", *argv]))


def test_the_command_takes_a_prompt_form_and_the_tokenizer_of_the_text_forms(tmp_path):
    default = routing_config(parsed("--workload", "shared-prefix"))
    chat = routing_config(parsed("--workload", "shared-prefix", "--prompt-form", "chat"))

    assert (default.prompt_form, default.tokenizer) == ("keys", None)
    assert (chat.prompt_form, chat.tokenizer) == ("chat", str(DEFAULT_TOKENIZER))
    with pytest.raises(ConfigError, match="needs a prompt workload"):
        routing_config(parsed("--prompt-form", "ids"))
    with pytest.raises(ConfigError, match="no tokenizer.json"):
        routing_config(parsed("--workload", "no-prefix", "--prompt-form", "text", "--tokenizer", str(tmp_path)))


def test_the_benchmark_writes_the_prompts_once_in_its_form():
    config = RoutingConfig(workload=RoutingWorkload.of(SHARED_PREFIX, duration_s=5.0), prompt_form="ids")

    assert isinstance(config.turns(), type(prompt_forms.turns_of("ids", MODEL)))
    assert config.turns().keep_ids

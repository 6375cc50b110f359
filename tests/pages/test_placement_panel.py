"""The pool page's "where would a request go" panel: the placement API's answer (SPEC 14.1), asked without placing."""

import re
from functools import partial

import pytest

from proxy_app.placement.candidates import BOARD
from tests.factories import T0_MS, make_engine, make_snapshot
from tests.pages import conftest as pages
from tests.pages.conftest import by_testid, one

pytestmark = pytest.mark.django_db


@pytest.fixture
def serving(register_instance, report, frozen):
    """Register and report an instance whose engine serves ``model``: ``serving("a", waiting=2, ...)``."""

    def _serving(instance_id, host="10.0.0.1", waiting=0, kv=0.1, model="tiny", lora=None, **snapshot):
        register_instance(instance_id, host=host)
        engine = make_engine(model=model, requests_waiting=waiting, kv_cache_usage_ratio=kv, scraped_at_ms=T0_MS,
                             lora=lora)
        assert report(instance_id, make_snapshot(engines=[engine], **snapshot)).status_code == 200

    return _serving


candidates = partial(pages.row_ids, attribute="data-candidate")


def candidate_row(html, instance_id):
    return pages.row_of(html, instance_id, "data-candidate").text


def test_it_shows_the_ranking_the_api_answers_on_the_pool_page(page, api, serving):
    serving("busy", host="10.0.0.1", waiting=4)
    serving("idle", host="10.0.0.2", waiting=0, kv=0.0)
    serving("kv", host="10.0.0.3", waiting=0, kv=0.6)
    html = page("/pool/")
    assert candidates(html) == ["idle", "kv", "busy"]
    assert candidates(html) == [c["instance_id"] for c in api.post("/v1/placement", {"count": 5}).json()["candidates"]]
    assert one(html, "placement-verdict") == "accept"
    assert one(html, "placement-reason") == "lowest_pressure"
    assert one(html, "placement-counts") == "3 considered · 3 eligible · none excluded"
    assert one(html, "placement-destination") == (
        "x-gateway-destination-endpoint: 10.0.0.2:8000,10.0.0.3:8000,10.0.0.1:8000")
    assert candidate_row(html, "kv") == "2 kv 10.0.0.3:8000 0.750 0 / 4 60.0 % 0 ms pressure_from_kv_cache"
    assert candidate_row(html, "busy").startswith("3 busy 10.0.0.1:8000 0.800 4 / 4 ")
    assert 'href="/pool/instances/idle/"' in html


def test_it_offers_the_models_and_adapters_the_pool_serves(page, serving):
    serving("a", model="llama", lora={"max": 2, "running": ["sql"], "waiting": []})
    serving("b", model="qwen")
    html = page("/pool/")
    select = re.search(r'<select name="model".*?</select>', html, re.S).group(0)
    assert re.findall(r'<option value="([^"]*)"', select) == ["", "llama", "qwen"]
    assert '<option value="sql">' in html


def test_it_answers_the_form_in_the_fragment(page, serving):
    serving("a", model="llama", waiting=1)
    serving("b", model="qwen", host="10.0.0.2", lora={"max": 2, "running": ["sql"], "waiting": []})
    html = page("/pool/placement?model=qwen&adapter=sql&prompt_tokens=512")
    assert candidates(html) == ["b"]
    assert one(html, "placement-counts") == "2 considered · 1 eligible · excluded: model 1"
    # It polls itself with the same question.
    assert 'hx-get="/pool/placement?model=qwen&amp;adapter=sql&amp;prompt_tokens=512"' in html
    assert candidates(page("/pool/placement?adapter=none-such")) == []
    assert one(page("/pool/placement?adapter=none-such"), "placement-verdict") == "unavailable"


def test_it_keeps_a_session_key_on_its_instance_and_says_so(page, serving):
    for n in range(4):
        serving(f"i-{n}", host=f"10.0.0.{n + 1}")
    first = candidates(page("/pool/placement?session_key=user-1"))[0]
    html = page("/pool/placement?session_key=user-1")
    assert candidates(html)[0] == first
    assert one(html, "placement-reason") == "session_affinity"
    assert "session_affinity" in candidate_row(html, first)


def test_looking_is_not_placing(page, api, serving):
    serving("a")
    serving("b", host="10.0.0.2")
    for _ in range(5):
        first = candidates(page("/pool/placement"))[0]
        page("/pool/")
    assert BOARD.board.pending_of(first) == 0
    placed = api.post("/v1/placement", {}).json()["candidates"][0]["instance_id"]
    assert BOARD.board.pending_of(placed) == 1


def test_it_shows_the_ranking_it_holds_back_when_shedding(page, serving):
    serving("a", waiting=40)
    html = page("/pool/placement")
    assert one(html, "placement-verdict") == "shed"
    assert "Shedding" in html and candidates(html) == ["a"]
    assert by_testid(html, "placement-destination") == []


def test_it_queues_when_every_instance_is_saturated(page, serving):
    serving("a", waiting=6)
    html = page("/pool/placement")
    assert one(html, "placement-verdict") == "queue" and one(html, "placement-reason") == "all_saturated"


def test_it_says_when_nothing_is_eligible(page, frozen):
    html = page("/pool/")
    assert one(html, "placement-verdict") == "unavailable"
    assert "No instance is eligible" in one(html, "placement-none")


@pytest.mark.parametrize("query, words", [
    ("prompt_tokens=-3", "prompt tokens"), ("prompt_tokens=many", "prompt tokens"),
    ("session_key=" + "k" * 257, "session key"),
])
def test_it_refuses_a_form_the_api_would_refuse_in_words(page, serving, query, words):
    serving("a")
    html = page(f"/pool/placement?{query}")
    assert words in one(html, "placement-error")
    assert candidates(html) == []


def test_the_form_leaves_refusing_to_the_server(page, serving):
    # The browser's own check of min="0" halted a prompt of -5 tokens silently, the old answer left on screen
    # (issue 31, point 5): the form is not validated by the browser, so the refusal above is shown.
    serving("a")
    form = re.search(r'<form id="pool-placement-form"[^>]*>', page("/pool/"), re.S).group(0)
    assert re.search(r"\snovalidate\b", form), form


def test_it_falls_back_to_five_candidates_for_an_unknown_count(page, serving):
    for n in range(7):
        serving(f"i-{n}", host=f"10.0.0.{n + 1}")
    assert len(candidates(page("/pool/placement?count=7"))) == 5
    assert len(candidates(page("/pool/placement?count=3"))) == 3


def test_it_asks_with_a_shared_prefix_and_shows_each_candidate_s_cached_tokens(page, api, register_instance,
                                                                                 report, frozen):
    from agent.prefix_keys import prompt_keys
    from proxy_app.pages.placement_panel import shared_prompt

    events = {"status": "ok", "error": None, "resident_blocks": 3, "events_total": 3, "gaps_total": 0,
              "last_event_age_ms": 5, "block_tokens": 16}
    for instance_id, host, waiting in (("cold", "10.0.0.1", 0), ("warm", "10.0.0.2", 1)):
        register_instance(instance_id, host=host)
        engine = make_engine(model="tiny", requests_waiting=waiting, kv_cache_usage_ratio=0.1, scraped_at_ms=T0_MS,
                             kv_events=events)
        report(instance_id, make_snapshot(engines=[engine]))
    keys = prompt_keys("tiny", shared_prompt("b", 64), 16)
    api.post("/v1/instance/prefix_blocks", {"instance_id": "warm", "engine": "e0", "epoch": 1, "seq": 0,
                                            "block_tokens": 16, "reset": True, "added": keys[:3]})
    html = page("/pool/placement?model=tiny&prompt_tokens=64&prefix=b")
    assert candidates(html) == ["warm", "cold"]
    assert by_testid(html, "placement-cached") == ["48", "0"]
    plain = page("/pool/placement?model=tiny")
    assert not by_testid(plain, "placement-cached")
    refused = page("/pool/placement?prompt_tokens=64&prefix=a")
    assert "A prompt needs the model" in one(refused, "placement-error")


def test_looking_with_a_prompt_records_nothing_in_learned_mode(page, serving):
    from proxy_app.models import PrefixLearned

    serving("a")
    page("/pool/placement?model=tiny&prompt_tokens=64&prefix=a")
    assert not PrefixLearned.objects.exists()


def test_a_chat_message_is_keyed_by_the_model_s_own_tokenizer_or_says_why_not(page, serving, settings):
    from tests.tokenizers import TINY_MODEL_DIR, tiny_tokenizer

    serving("a")
    html = page("/pool/placement?model=tiny&message=Hello+there")
    assert one(html, "placement-text-prompt") == "chat message not keyed: no_tokenizer no tokenizer is known " \
                                                 "for this model (placed by load)"
    settings.FLEETWATCH_TOKENIZERS = {"tiny": str(TINY_MODEL_DIR)}
    tokenizer = tiny_tokenizer()
    tokens = len(tokenizer.chat_ids({"messages": [{"role": "user", "content": "Hello there"}]}))
    html = page("/pool/placement?model=tiny&message=Hello+there")
    assert one(html, "placement-text-prompt") == f"chat message: {tokens} tokens, tokenizer from the operator " \
                                                 f"({tokenizer.sha256[:12]})"
    assert candidates(html) == ["a"]

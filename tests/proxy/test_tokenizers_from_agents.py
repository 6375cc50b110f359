"""Tokenizer files an agent offered reach placement (SPEC 16.2): without an operator's map, a chat is keyed by
the files stored from the agents, in every process within the registry's refresh, and files that do not load are
``no_tokenizer`` with their error kept for the admin."""

import hashlib

import pytest

from proxy_app.models import TokenizerOffer
from proxy_app.tokenizers.registry import TokenizerRegistry
from tests.factories import T0_MS, make_engine, make_snapshot
from tests.tokenizers import FILE_NAMES, TINY_MODEL_DIR, tiny_tokenizer

pytestmark = pytest.mark.django_db

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "Where does this request go? " * 10}]}


def offered(api, files, instance_id="a", model="tiny"):
    digests = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    missing = api.post("/v1/instance/tokenizer", {"instance_id": instance_id, "model": model,
                                                  "files": digests}).json()["missing"]
    token = api.token("instance")
    for name, data in files.items():
        if digests[name] in missing:
            answer = api.client.put(f"/v1/instance/tokenizer/{digests[name]}", data=data,
                                    content_type="application/octet-stream", HTTP_AUTHORIZATION=f"Bearer {token}")
            assert answer.status_code == 200, answer.content
    return digests


@pytest.fixture
def serving(register_instance, report, frozen):
    register_instance("a")
    assert report("a", make_snapshot(engines=[make_engine(scraped_at_ms=T0_MS, requests_waiting=0)])).status_code == 200


def tiny_files():
    return {name: (TINY_MODEL_DIR / name).read_bytes() for name in FILE_NAMES if (TINY_MODEL_DIR / name).exists()}


def test_a_chat_is_keyed_by_the_tokenizer_an_agent_uploaded(api, serving):
    assert api.post("/v1/placement", CHAT).json()["prompt_error"] == "no_tokenizer"
    digests = offered(api, tiny_files())
    answer = api.post("/v1/placement", CHAT).json()
    assert answer["prompt_error"] is None
    assert answer["tokenizer"] == {"source": "agent", "sha256": digests["tokenizer.json"]}
    assert answer["prompt_tokens"] == len(tiny_tokenizer().chat_ids(CHAT))


def test_another_process_uses_a_stored_tokenizer_within_its_refresh(api, serving, settings):
    settings.FLEETWATCH_TOKENIZER_REFRESH_S = 2.0  # the default: within SPEC 16.2's 5 s
    now = [1000.0]
    other = TokenizerRegistry(clock=lambda: now[0])
    assert other.lookup("tiny")[0] is None
    offered(api, tiny_files())
    assert other.lookup("tiny")[0] is None  # read less than REFRESH_S ago
    now[0] += 2.0
    assert other.lookup("tiny")[0].source == "agent"


def test_the_operator_s_map_wins_over_the_agents(api, serving, settings, tmp_path):
    offered(api, tiny_files())
    settings.FLEETWATCH_TOKENIZERS = {"tiny": str(TINY_MODEL_DIR)}
    assert api.post("/v1/placement", CHAT).json()["tokenizer"]["source"] == "operator"


def test_files_that_do_not_load_are_no_tokenizer_with_the_error_kept(api, serving):
    offered(api, {"tokenizer.json": b"{\"not\": \"a tokenizer\"}"})
    answer = api.post("/v1/placement", CHAT)
    assert (answer.status_code, answer.json()["prompt_error"], answer.json()["verdict"]) == \
        (200, "no_tokenizer", "accept")
    assert "tokenizer.json does not load" in TokenizerOffer.objects.get(model="tiny").load_error


def test_agents_turned_off_leave_placement_by_load(api, serving, settings):
    offered(api, tiny_files())
    settings.FLEETWATCH_TOKENIZERS_FROM_AGENTS = False
    from proxy_app.tokenizers.registry import TOKENIZERS
    TOKENIZERS.reset()
    assert api.post("/v1/placement", CHAT).json()["prompt_error"] == "no_tokenizer"

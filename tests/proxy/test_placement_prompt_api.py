"""``POST /v1/placement`` with a prompt through the API (SPEC 15.5), on both databases and both entry points."""

import json

import pytest

from agent.prefix_keys import prompt_keys
from proxy_app.prefix.keeper import PrefixKeeper
from tests.factories import T0, T0_MS, make_engine, make_snapshot

pytestmark = [pytest.mark.django_db, pytest.mark.both_entry_points]

EVENTS_OK = {"status": "ok", "error": None, "resident_blocks": 0, "events_total": 0, "gaps_total": 0,
             "last_event_age_ms": 10, "block_tokens": 16}
TOKENS = list(range(64))  # 4 blocks of 16
KEYS = prompt_keys("tiny", TOKENS, 16)


@pytest.fixture
def serving(register_instance, report, frozen):
    def _serving(instance_id, host="10.0.0.1", waiting=0, kv_events=EVENTS_OK):
        register_instance(instance_id, host=host)
        engine = make_engine(requests_waiting=waiting, kv_cache_usage_ratio=0.1, scraped_at_ms=T0_MS,
                             kv_events=kv_events)
        assert report(instance_id, make_snapshot(engines=[engine])).status_code == 200
    return _serving


def holds(api, instance_id, keys, seq=0):
    answer = api.post("/v1/instance/prefix_blocks", {"instance_id": instance_id, "engine": "e0", "epoch": 1,
                                                     "seq": seq, "block_tokens": 16, "reset": True,
                                                     "added": list(keys)})
    assert answer.json() == {"ok": True, "resync": False}


def place(api, **body):
    return api.post("/v1/placement", {"model": "tiny", **body})


def test_it_ranks_the_instance_holding_the_prompt_s_prefix_first(api, serving):
    serving("cold", host="10.0.0.1")
    serving("warm", host="10.0.0.2", waiting=1)
    holds(api, "warm", KEYS[:3])
    answer = place(api, prompt_token_ids=TOKENS + [7, 7, 7]).json()
    assert [c["instance_id"] for c in answer["candidates"]] == ["warm", "cold"]
    assert [(c["prefix_hit_blocks"], c["prefix_hit_tokens"]) for c in answer["candidates"]] == [(3, 48), (0, 0)]
    assert (answer["prompt_blocks"], answer["prefix_source"]) == (4, "events")
    assert answer["candidates"][0]["reasons"] == ["pressure_from_queue", "prefix_cache_hit"]


def test_it_takes_the_keys_themselves_and_counts_the_leading_run_only(api, serving):
    serving("a")
    holds(api, "a", [KEYS[0], KEYS[1], KEYS[3]])
    answer = place(api, prompt_block_keys=KEYS).json()
    assert answer["candidates"][0]["prefix_hit_blocks"] == 2 and answer["prompt_blocks"] == 4


def test_another_process_sees_an_update_on_its_next_read(api, serving, frozen):
    serving("a")
    other = PrefixKeeper()
    assert other.hits("events", KEYS, T0) == {}
    holds(api, "a", KEYS)
    frozen.shift(1)
    assert other.hits("events", KEYS, T0 + 1) == {"a": 4}
    fresh = PrefixKeeper()  # a restarted process: rebuilt from the table
    assert fresh.hits("events", KEYS, T0 + 1) == {"a": 4}


def test_learned_mode_records_an_accepted_prompt_on_its_first_candidate_for_the_ttl(api, serving, frozen, settings):
    serving("a", kv_events=None)
    serving("b", host="10.0.0.2", kv_events={**EVENTS_OK, "status": "no_events"})
    first = place(api, prompt_token_ids=TOKENS).json()
    assert first["prefix_source"] == "placements"
    assert [c["prefix_hit_blocks"] for c in first["candidates"]] == [0, 0]
    chosen = first["candidates"][0]["instance_id"]
    other = PrefixKeeper()
    assert other.hits("placements", KEYS, T0) == {chosen: 4}
    again = place(api, prompt_token_ids=TOKENS).json()
    assert again["candidates"][0]["instance_id"] == chosen
    assert again["candidates"][0]["prefix_hit_tokens"] == 64
    frozen.shift(settings.FLEETWATCH_PREFIX_LEARNED_TTL_S + 1)
    assert PrefixKeeper().hits("placements", KEYS, T0 + settings.FLEETWATCH_PREFIX_LEARNED_TTL_S + 1) == {}


def test_events_mode_records_nothing(api, serving):
    from proxy_app.models import PrefixLearned

    serving("a")
    place(api, prompt_token_ids=TOKENS)
    assert not PrefixLearned.objects.exists()


def test_a_prompt_never_changes_the_verdict(api, serving):
    serving("a", waiting=6)
    holds(api, "a", KEYS)
    response = place(api, prompt_token_ids=TOKENS)
    assert response.status_code == 200 and response.json()["verdict"] == "queue"


@pytest.mark.parametrize("body, field", [
    ({"prompt_token_ids": [1], "prompt_block_keys": [1]}, "prompt_block_keys"),
    ({"model": None, "prompt_token_ids": [1]}, "model"),
    ({"prompt_token_ids": [-1]}, "prompt_token_ids"),
    ({"prompt_token_ids": [2**32]}, "prompt_token_ids"),
    ({"prompt_token_ids": [True]}, "prompt_token_ids"),
    ({"prompt_token_ids": list(range(4096)) + [False]}, "prompt_token_ids"),
    ({"prompt_token_ids": [1, 1.0]}, "prompt_token_ids"),
    ({"prompt_token_ids": [1, "2"]}, "prompt_token_ids"),
    ({"prompt_token_ids": [1, None]}, "prompt_token_ids"),
    ({"prompt_token_ids": [[1]]}, "prompt_token_ids"),
    ({"prompt_token_ids": [2**64]}, "prompt_token_ids"),
    ({"prompt_token_ids": [3] * 4096 + [-(2**40)]}, "prompt_token_ids"),
    ({"prompt_token_ids": "1 2 3"}, "prompt_token_ids"),
    ({"prompt_token_ids": [0] * 131_073}, "prompt_token_ids"),
    ({"prompt_block_keys": [2**63]}, "prompt_block_keys"),
    ({"prompt_block_keys": [-(2**63) - 1]}, "prompt_block_keys"),
    ({"prompt_block_keys": [1, True]}, "prompt_block_keys"),
    ({"prompt_block_keys": [1.0]}, "prompt_block_keys"),
    ({"prompt_block_keys": [0] * 8_193}, "prompt_block_keys"),
])
def test_it_refuses_a_bad_prompt(api, serving, body, field):
    serving("a")
    response = place(api, **body)
    assert response.status_code == 400 and response.json()["error"] == "validation_error"
    assert field in response.json()["detail"]


def test_it_takes_the_bounds_of_a_token_id_and_of_a_key(api, serving):
    serving("a")
    answer = place(api, prompt_token_ids=[0] * 16 + [2**32 - 1] * 16)
    assert answer.status_code == 200 and answer.json()["prompt_blocks"] == 2
    answer = place(api, prompt_block_keys=[-(2**63), 2**63 - 1])
    assert answer.status_code == 200 and answer.json()["prompt_blocks"] == 2


def test_it_takes_a_128k_token_prompt_and_refuses_a_body_over_1_mib(api, serving):
    serving("a")
    tokens = [99_999] * 131_072
    assert len(json.dumps({"model": "tiny", "prompt_token_ids": tokens})) < 1024 * 1024
    answer = place(api, prompt_token_ids=tokens)
    assert answer.status_code == 200 and answer.json()["prompt_blocks"] == 8_192
    over = place(api, prompt_token_ids=[1] * 131_072, padding="x" * (1024 * 1024))
    assert over.status_code == 413 and over.json()["error"] == "payload_too_large"


def test_other_writes_keep_the_smaller_body_limit(api, serving):
    response = api.post("/v1/instance/heartbeat", {"instance_id": "a", "padding": "x" * (300 * 1024)})
    assert response.status_code == 413

"""vLLM's KV-cache events decoded and indexed by SPEC 15.1's keys (SPEC 15.2).

The ``data/kv_events`` payloads were encoded by vLLM 0.32.0's own classes
(``vllm.distributed.kv_events.KVEventBatch`` through its msgspec encoder):
an array-like batch ``[ts, events, rank]`` of maps tagged ``"type"``. The
other spellings (a map batch, array-like events) are built here with msgpack.
"""

from pathlib import Path

import msgpack
import pytest

from agent.engines.kv_events import Cleared, Removed, Stored, WireError, decode_message, parse_endpoint, rank_endpoint
from agent.engines.kv_subscriber import KvSubscriber
from agent.prefix_keys import prompt_keys

DATA = Path(__file__).parent / "data" / "kv_events"
MODEL = "tiny-llama"
PROMPT = list(range(1, 129)) + list(range(200, 328)) + list(range(400, 528))  # the captures' three 128-token blocks


def frames(payload, seq=0):
    return [b"", seq.to_bytes(8, "big"), payload]


def stored(hashes, parent, tokens, size=16, medium="GPU", lora=None, extra=None, group=None):
    event = {"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": parent, "token_ids": tokens,
             "block_size": size, "lora_id": None, "medium": medium, "lora_name": lora}
    if extra is not None:
        event["extra_keys"] = extra
    if group is not None:
        event["group_idx"] = group
    return event


def batch(*events, rank=0):
    return msgpack.packb([1767225600.0, list(events), rank])


class Clock:
    def __init__(self):
        self.now = 1_000_000

    def ms(self):
        return self.now


def subscriber(model=MODEL, block_tokens=16):
    clock = Clock()
    return KvSubscriber("tcp://127.0.0.1:5557", block_tokens, lambda rank: model, clock_ms=clock.ms), clock


def test_it_decodes_the_batches_vllm_encodes():
    first = decode_message(frames((DATA / "vllm-0.32.0-stored.msgpack").read_bytes(), 7), msgpack.unpackb)
    assert first.seq == 7 and first.rank == 0 and first.ts == 1767225600.5
    assert first.events == [
        Stored([1111, 2222], None, PROMPT[:256], 128, None, "GPU", None, None),
        Stored([3333], 2222, PROMPT[256:], 128, None, "GPU", None, None),
    ]
    second = decode_message(frames((DATA / "vllm-0.32.0-removed-cleared.msgpack").read_bytes()), msgpack.unpackb)
    assert second.events == [Removed([3333], "GPU", None), Cleared()]


def test_it_reads_array_like_events_and_a_map_batch_and_bytes_hashes():
    array_event = ["BlockStored", [b"\x00" * 24 + (5).to_bytes(8, "big")], None, PROMPT[:16], 16, None, None, None]
    payload = msgpack.packb({"ts": 1.0, "events": [array_event, ["BlockRemoved", [9], "GPU"]],
                             "data_parallel_rank": 2})
    decoded = decode_message(frames(payload), msgpack.unpackb)
    assert decoded.rank == 2
    assert decoded.events == [Stored([5], None, PROMPT[:16], 16, None, None, None, None), Removed([9], "GPU", None)]


@pytest.mark.parametrize("message, reason", [
    ([b"", b"\x00" * 8], "2 frames"),
    ([b"", b"\x00" * 4, b"\x90"], "4 bytes"),
    (frames(b"\xc1\xc1garbage"), "not msgpack"),
    (frames(msgpack.packb("hello")), "neither"),
    (frames(msgpack.packb([1.0, [{"type": "Mystery"}], 0])), "unknown event"),
    (frames(msgpack.packb([1.0, [{"type": "BlockStored", "block_hashes": [1]}], 0])), "BlockStored"),
    (frames(msgpack.packb([1.0, [{"type": "BlockRemoved", "block_hashes": ["x"]}], 0])), "block hash"),
])
def test_it_names_what_is_wrong_with_a_message(message, reason):
    with pytest.raises(WireError, match=reason):
        decode_message(message, msgpack.unpackb)


def test_it_keys_engine_blocks_by_the_pool_block_size_and_chains_them_from_their_parent():
    sub, _ = subscriber()
    sub.handle(frames((DATA / "vllm-0.32.0-stored.msgpack").read_bytes(), 0), msgpack.unpackb)
    state = sub.rank(0)
    # Three engine blocks of 128 tokens: 3 x 8 keys of 16 tokens, exactly the prompt's own keys.
    assert sorted(state.blocks.keys()) == sorted(prompt_keys(MODEL, PROMPT))
    assert state.blocks.resident_blocks == 3 and state.events_total == 2
    sub.handle(frames((DATA / "vllm-0.32.0-removed-cleared.msgpack").read_bytes(), 1), msgpack.unpackb)
    assert state.blocks.keys() == [] and state.events_total == 4
    assert sub.figures(0) == {"status": "ok", "error": None, "resident_blocks": 0, "events_total": 4,
                              "gaps_total": 0, "last_event_age_ms": 0, "block_tokens": 16}


def test_it_drops_removed_blocks_and_sends_only_net_changes():
    sub, _ = subscriber()
    keys = prompt_keys(MODEL, PROMPT[:48])
    sub.handle(frames(batch(stored([1, 2, 3], None, PROMPT[:48]))), msgpack.unpackb)
    blocks = sub.rank(0).blocks
    assert blocks.drain() == (True, keys, [])  # the first drain is the whole set
    sub.handle(frames(batch({"type": "BlockRemoved", "block_hashes": [3], "medium": "GPU"}), 1), msgpack.unpackb)
    sub.handle(frames(batch(stored([4], 2, list(range(900, 916)))), 2), msgpack.unpackb)
    sub.handle(frames(batch({"type": "BlockRemoved", "block_hashes": [4], "medium": None}), 3), msgpack.unpackb)
    assert blocks.drain() == (False, [], [keys[2]])  # block 4 came and went between two drains: never sent
    assert blocks.drain() == (False, [], [])
    assert not blocks.has_changes()


def test_it_skips_blocks_it_cannot_key_and_counts_them():
    sub, _ = subscriber()
    sub.handle(frames(batch(
        stored([1], 999, PROMPT[:16]),  # parent unknown to the agent (stored before it started)
        stored([2], None, PROMPT[:16], medium="CPU"),  # an offloading tier, not the device's
        stored([3, 4], None, PROMPT[:32], extra=[None, [["mm", "img", 0]]]),  # the second has an image
        stored([5], 4, PROMPT[32:48]),  # child of the skipped block 4
        stored([6], None, PROMPT[:16], group=1),  # a second KV-cache group of a hybrid model
    )), msgpack.unpackb)
    blocks = sub.rank(0).blocks
    assert blocks.keys() == prompt_keys(MODEL, PROMPT[:16])  # block 3 alone
    assert blocks.skipped_blocks == 3


def test_it_seeds_an_adapters_blocks_with_the_adapter():
    sub, _ = subscriber()
    sub.handle(frames(batch(stored([1], None, PROMPT[:16], lora="sql", extra=[["sql"]]))), msgpack.unpackb)
    assert sub.rank(0).blocks.keys() == prompt_keys(MODEL, PROMPT[:16], adapter="sql")


def test_it_does_not_index_an_engine_block_size_that_is_not_a_multiple_of_the_pool_block():
    sub, _ = subscriber()
    sub.handle(frames(batch(stored([1], None, PROMPT[:24], size=24))), msgpack.unpackb)
    assert sub.rank(0).blocks.keys() == []
    figures = sub.figures(0)
    assert figures["status"] == "block_size_mismatch"
    assert figures["error"] == "engine block size 24 is not a multiple of 16"


def test_it_counts_a_sequence_gap_and_sends_the_whole_set_again():
    sub, clock = subscriber()
    sub.handle(frames(batch(stored([1], None, PROMPT[:16])), 0), msgpack.unpackb)
    blocks = sub.rank(0).blocks
    blocks.drain()
    sub.handle(frames(batch(stored([2], 1, PROMPT[16:32])), 5), msgpack.unpackb)
    assert sub.figures(0)["gaps_total"] == 1 and sub.figures(0)["status"] == "gap"
    assert blocks.drain() == (True, prompt_keys(MODEL, PROMPT[:32]), [])
    clock.now += 61_000
    assert sub.figures(0)["status"] == "ok" and sub.figures(0)["last_event_age_ms"] == 61_000


def test_it_starts_over_when_the_sequence_goes_back_or_the_model_changes():
    model = {"name": MODEL}
    sub = KvSubscriber("tcp://127.0.0.1:5557", 16, lambda rank: model["name"])
    sub.handle(frames(batch(stored([1], None, PROMPT[:16])), 10), msgpack.unpackb)
    sub.handle(frames(batch(stored([2], None, PROMPT[16:32])), 0), msgpack.unpackb)  # the engine restarted
    assert sub.rank(0).blocks.keys() == prompt_keys(MODEL, PROMPT[16:32])
    model["name"] = "other-model"
    sub.handle(frames(batch(stored([3], None, PROMPT[:16])), 1), msgpack.unpackb)
    assert sub.rank(0).blocks.keys() == prompt_keys("other-model", PROMPT[:16])
    assert sub.figures(0)["gaps_total"] == 0


def test_it_keeps_each_data_parallel_rank_apart():
    sub, _ = subscriber()
    sub.handle(frames(batch(stored([1], None, PROMPT[:16]), rank=0), 0), msgpack.unpackb)
    sub.handle(frames(batch(stored([1], None, PROMPT[16:32]), rank=1), 0), msgpack.unpackb)
    assert sub.rank(0).blocks.keys() == prompt_keys(MODEL, PROMPT[:16])
    assert sub.rank(1).blocks.keys() == prompt_keys(MODEL, PROMPT[16:32])
    assert rank_endpoint("tcp://127.0.0.1:5557", 1) == "tcp://127.0.0.1:5558"


def test_it_reports_garbage_as_an_error_and_keeps_going():
    sub, clock = subscriber()
    sub.handle([b"", b"\x00" * 8, b"\xc1"], msgpack.unpackb)
    assert sub.figures(0)["status"] == "error" and "not msgpack" in sub.figures(0)["error"]
    sub.handle(frames(batch(stored([1], None, PROMPT[:16]))), msgpack.unpackb)
    assert sub.rank(0).blocks.resident_keys == 1
    clock.now += 61_000
    assert sub.figures(0)["status"] == "ok"


@pytest.mark.parametrize("text, endpoint", [
    ("tcp://*:5557", "tcp://127.0.0.1:5557"),
    ("tcp://10.0.0.5:5557", "tcp://10.0.0.5:5557"),
    ("ipc:///tmp/kv", "ipc:///tmp/kv"),
])
def test_it_reads_endpoints(text, endpoint):
    assert parse_endpoint(text) == endpoint


@pytest.mark.parametrize("text", ["http://x:1", "tcp://host", "tcp://host:0", "tcp://:5557", "ipc://"])
def test_it_refuses_what_is_not_an_endpoint(text):
    with pytest.raises(ValueError):
        parse_endpoint(text)

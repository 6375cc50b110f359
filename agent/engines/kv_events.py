"""vLLM's KV-cache events on the wire (SPEC 15.2): one ZMQ message decoded into plain events.

A message is three frames: the topic, the batch's sequence number as 8 bytes
big-endian, and a msgpack payload. vLLM encodes the payload with msgspec:
``EventBatch`` as ``[ts, events, data_parallel_rank]`` (an array-like struct)
or, in builds without ``array_like``, as the map ``{"ts", "events",
"data_parallel_rank"}``; each event likewise either as a map tagged ``"type"``
or as an array whose first element is the tag and whose other elements are
the fields in declaration order. Both spellings are read here, so the agent
follows vLLM across releases that switch between them.

Only what the index needs is kept: ``Stored``, ``Removed`` and ``Cleared``
named tuples. Anything else (a malformed payload, an unknown tag) raises
``WireError`` with a short reason; the subscriber counts it and goes on.
msgpack is imported by the caller (the ``kv-events`` extra), not here.
"""

from __future__ import annotations

from typing import NamedTuple

# BlockStored's fields in vLLM's declaration order (array-like encoding, tag first).
STORED_FIELDS = ("block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name",
                 "extra_keys", "group_idx")
REMOVED_FIELDS = ("block_hashes", "medium", "group_idx")
END_OF_REPLAY = -1


class WireError(ValueError):
    """A message that is not a vLLM KV-event batch."""


class Stored(NamedTuple):
    block_hashes: list
    parent_block_hash: object
    token_ids: list
    block_size: int
    lora_name: str | None
    medium: str | None
    extra_keys: object
    group_idx: int | None


class Removed(NamedTuple):
    block_hashes: list
    medium: str | None
    group_idx: int | None


class Cleared(NamedTuple):
    pass


class Batch(NamedTuple):
    seq: int
    ts: float | None
    events: list
    rank: int | None


def parse_seq(frame: bytes) -> int:
    if len(frame) != 8:
        raise WireError(f"sequence frame of {len(frame)} bytes, not 8")
    return int.from_bytes(frame, "big", signed=True)


def decode_message(frames, unpackb) -> Batch:
    """``(topic, seq, payload)`` frames into a ``Batch``; ``unpackb`` is ``msgpack.unpackb``."""
    if len(frames) != 3:
        raise WireError(f"{len(frames)} frames, not (topic, sequence, payload)")
    return decode_payload(parse_seq(frames[1]), frames[2], unpackb)


def decode_payload(seq: int, payload: bytes, unpackb) -> Batch:
    try:
        # msgpack's own limits follow the buffer's length: garbage cannot make it allocate more.
        batch = unpackb(payload, raw=False, strict_map_key=False, use_list=True)
    except Exception as error:  # noqa: BLE001 - msgpack raises several types for bad bytes
        raise WireError(f"payload is not msgpack ({type(error).__name__})") from None
    if isinstance(batch, dict):
        ts, events, rank = batch.get("ts"), batch.get("events"), batch.get("data_parallel_rank")
    elif isinstance(batch, list) and len(batch) >= 2:
        ts, events = batch[0], batch[1]
        rank = batch[2] if len(batch) > 2 else None
    else:
        raise WireError("payload is neither [ts, events, rank] nor a map")
    if not isinstance(events, list):
        raise WireError("the batch's events are not a list")
    if rank is not None and (not isinstance(rank, int) or isinstance(rank, bool) or rank < 0):
        raise WireError("data_parallel_rank is not a whole number")
    return Batch(seq, ts if isinstance(ts, (int, float)) else None, [decode_event(e) for e in events], rank)


def decode_event(event):
    """One event, a map tagged ``"type"`` or an array-like struct whose first element is the tag."""
    if event.__class__ is dict:
        f = event
        tag = f.get("type")
    elif isinstance(event, list) and event and isinstance(event[0], str):
        tag = event[0]
        f = dict(zip(STORED_FIELDS if tag == "BlockStored" else REMOVED_FIELDS, event[1:]))
    else:
        raise WireError("an event is neither a tagged map nor a tagged array")
    if tag == "BlockStored":
        hashes, tokens, size = f.get("block_hashes"), f.get("token_ids"), f.get("block_size")
        if hashes.__class__ is not list or tokens.__class__ is not list:
            raise WireError("BlockStored without block_hashes or token_ids lists")
        if size.__class__ is not int or size < 1:
            raise WireError("BlockStored without a positive block_size")
        parent = f.get("parent_block_hash")
        return Stored(block_hashes(hashes), None if parent is None else block_hash(parent), tokens, size,
                      _text(f.get("lora_name")), _text(f.get("medium")), f.get("extra_keys"),
                      _whole(f.get("group_idx")))
    if tag == "BlockRemoved":
        hashes = f.get("block_hashes")
        if hashes.__class__ is not list:
            raise WireError("BlockRemoved without a block_hashes list")
        return Removed(block_hashes(hashes), _text(f.get("medium")), _whole(f.get("group_idx")))
    if tag == "AllBlocksCleared":
        return Cleared()
    raise WireError(f"unknown event {str(tag)[:40]!r}")


def block_hashes(values: list) -> list:
    """A list of block hashes: as they are when the first is an int (vLLM's default; thousands a second, so not
    checked one by one: an odd element is refused where the index uses it), else each reduced by ``block_hash``."""
    if not values or values[0].__class__ is int:
        return values
    return [block_hash(value) for value in values]


def block_hash(value) -> int:
    """An engine block hash as an int: vLLM publishes 64-bit ints by default (``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES``)
    and the full digest as bytes otherwise, which is reduced here the way vLLM reduces it (its last 8 bytes)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, bytes) and value:
        return int.from_bytes(value[-8:], "big")
    raise WireError("a block hash is neither an int nor bytes")


def _text(value):
    return value if isinstance(value, str) else None


def _whole(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def rank_endpoint(endpoint: str, rank: int) -> str:
    """Data-parallel rank ``rank``'s publisher: vLLM binds each rank on the base port plus its rank."""
    if rank == 0:
        return endpoint
    if endpoint.startswith("tcp://"):
        base, _, port = endpoint.rpartition(":")
        return f"{base}:{int(port) + rank}"
    return f"{endpoint}_dp{rank}"


def parse_endpoint(text: str) -> str:
    """A ZMQ endpoint the agent connects to: ``tcp://HOST:PORT`` (``*`` means this host) or ``ipc://PATH``."""
    value = text.strip()
    if value.startswith("ipc://") and len(value) > len("ipc://"):
        return value
    if value.startswith("tcp://"):
        host, sep, port = value[len("tcp://"):].rpartition(":")
        if sep and host and port.isdigit() and 1 <= int(port) <= 65535:
            # vLLM's own example binds tcp://*:PORT; the agent connects to it on this host.
            return f"tcp://127.0.0.1:{port}" if host == "*" else value
    raise ValueError(f"{text!r} is not a ZMQ endpoint (tcp://HOST:PORT or ipc://PATH)")

"""Reading one engine's KV-cache event publisher in the background (SPEC 15.2).

One thread per configured endpoint owns one ZMQ SUB socket (ZMQ sockets are
not thread-safe) and applies each batch to the resident set of the rank that
sent it. Nothing else waits on this thread: the sampler reads counters under
a short lock, the prefix reporter drains the sets, so a hung, absent or
garbage-sending publisher never delays a snapshot, a report or ``/healthz``.
The socket's receive high-water mark bounds what queues up; what ZMQ drops
past it shows as a sequence gap.

Data-parallel ranks publish on consecutive ports; each batch names its rank,
and each rank has its own sequence numbers and resident set. The subscriber
connects to rank 0 at start and to rank ``r``'s port once the engine's
metrics show an engine labelled ``r`` (``want_rank``).

A sequence gap is counted and, with a replay endpoint (vLLM's ROUTER), the
missed batches are asked for; without one, or when the replay does not cover
them, the rank's set is sent again whole (a reset) since removals may be lost.
A sequence that goes back means the engine restarted: its cache is empty.

pyzmq and msgpack come with the ``kv-events`` extra and are imported when a
subscriber starts (``require_extra`` checks them at the agent's start).
"""

from __future__ import annotations

import logging
import threading

from agent.engines.kv_events import END_OF_REPLAY, WireError, decode_message, decode_payload, parse_seq, rank_endpoint
from agent.engines.kv_index import ResidentSet
from agent.sampler import monotonic_ms

log = logging.getLogger(__name__)

EXTRA = "kv-events"
# The thread waits on the socket for a batch and takes every batch queued. When that batch came within
# ``quiet_ms`` of the thread's last look, the publisher is busy: the thread then holds off for ``hold_ms`` (the
# prefix reporter's interval: changes are not sent more often than that) before it looks again. A publisher
# sending 100 batches a second costs one wakeup a second, not 100 and not 4 (at four a second the wakeups were
# about half of the thread's CPU, issue 32's agent cost). A batch after a quiet spell (a lone request's blocks)
# is taken at once and the thread does not hold after it, so the next one is taken at once too unless it
# follows close behind: the quiet engine's blocks are not kept a hold from its Proxy (issue 32's 2 s from a
# completion to placement). An idle socket is polled for POLL_MS at a time, so a stop or a new rank waits no
# longer.
DEFAULT_HOLD_MS = 1000
DEFAULT_QUIET_MS = 100
POLL_MS = 250
RECEIVE_HWM = 10_000  # batches held for the thread; beyond this ZMQ drops (counted as a gap)
MAX_BATCHES_PER_TURN = 10_000  # one wakeup's worth at most (RECEIVE_HWM): then the stop flag is looked at
STATUS_WINDOW_MS = 60_000  # a gap or a bad message colours the status this long
REPLAY_TIMEOUT_MS = 1000


def require_extra() -> str | None:
    """None when pyzmq and msgpack import, else the message telling the operator what to install."""
    try:
        import msgpack  # noqa: F401
        import zmq  # noqa: F401
    except ImportError as error:
        return (f"--engine-kv-events needs pyzmq and msgpack ({error}); install the agent's extra: "
                f"pip install 'fleetwatch[{EXTRA}]'")
    return None


def receive(sock, flags) -> list:
    """One message's frames as bytes: ``recv_multipart``'s answer, without its per-frame ``getsockopt(RCVMORE)``.

    pyzmq looks each option up in an ``Enum`` (~0.6 µs a frame, three frames a batch); a frame's ``more``
    asks libzmq directly (issue 32's agent cost).
    """
    frame = sock.recv(flags, copy=False)
    frames = [frame.bytes]
    while frame.more:
        frame = sock.recv(flags, copy=False)
        frames.append(frame.bytes)
    return frames


class RankState:
    """One rank's resident set and the counters its ``kv_events`` object reports."""

    def __init__(self, block_tokens):
        self.blocks = ResidentSet(block_tokens)
        self.events_total = 0
        self.gaps_total = 0
        self.last_seq = None
        self.last_event_ms = None
        self.gap_at_ms = None


class KvSubscriber:
    """One engine endpoint's events, applied to per-rank resident sets."""

    def __init__(self, endpoint, block_tokens, model_of, replay_endpoint=None, clock_ms=monotonic_ms,
                 name="fleetwatch-kv", hold_ms=DEFAULT_HOLD_MS, quiet_ms=DEFAULT_QUIET_MS):
        self.endpoint = endpoint
        self.hold_ms, self.quiet_ms = hold_ms, quiet_ms
        self.replay_endpoint = replay_endpoint
        self.block_tokens = block_tokens
        self._model_of = model_of  # rank -> the engine's model name (from its metrics), or None
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        self._ranks: dict[int, RankState] = {}
        self._wanted = {0}
        self._connected: set[int] = set()
        self._models: dict[int, str] = {}
        self._turn_models = None
        self._error = None
        self._error_at_ms = None
        self.bad_messages = 0
        self.turns = 0  # times the thread took what had queued (one a hold at most)
        self.holds = 0  # turns after which the thread held off
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    # --- lifecycle --------------------------------------------------------------

    def start(self):
        self._thread.start()

    def stop(self, timeout_s=2.0):
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout_s)

    def want_rank(self, rank: int):
        with self._lock:
            self._wanted.add(rank)

    def rank(self, rank: int) -> RankState:
        with self._lock:
            state = self._ranks.get(rank)
            if state is None:
                state = self._ranks[rank] = RankState(self.block_tokens)
            return state

    def ranks(self) -> dict:
        with self._lock:
            return dict(self._ranks)

    # --- the thread ---------------------------------------------------------------

    def _run(self):
        missing = require_extra()
        if missing:  # the command line checks this at start; an embedding program may not have
            self._note_error(missing)
            log.error("kv events %s: %s", self.endpoint, missing)
            return
        import msgpack
        import zmq

        context = zmq.Context()
        sub = context.socket(zmq.SUB)
        sub.setsockopt(zmq.RCVHWM, RECEIVE_HWM)
        sub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        looked_at = None  # clock_ms of the thread's last look (after its last turn); None: before the first
        try:
            while not self._stop.is_set():
                self._connect_wanted(sub)
                if not sub.poll(POLL_MS, zmq.POLLIN):
                    continue
                busy = looked_at is not None and self._clock_ms() - looked_at < self.quiet_ms
                self._turn_models = {}  # the engine's model, looked up once a turn
                for _ in range(MAX_BATCHES_PER_TURN):
                    try:
                        frames = receive(sub, zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    self.handle(frames, msgpack.unpackb, context)
                self._turn_models = None
                self.turns += 1
                if busy:
                    self.holds += 1
                    self._stop.wait(self.hold_ms / 1000.0)
                looked_at = self._clock_ms()
        except Exception as error:  # noqa: BLE001 - the thread reports its end rather than dying silently
            log.exception("kv events %s: the subscriber stopped", self.endpoint)
            self._note_error(f"subscriber_error:{type(error).__name__}")
        finally:
            sub.close(0)
            context.term()

    def _connect_wanted(self, sub):
        with self._lock:
            missing = self._wanted - self._connected
        for rank in sorted(missing):
            try:
                sub.connect(rank_endpoint(self.endpoint, rank))
            except Exception as error:  # noqa: BLE001 - a bad endpoint is the status's business
                self._note_error(f"connect_failed:{error}")
            with self._lock:
                self._connected.add(rank)

    def handle(self, frames, unpackb, context=None):
        """Apply one ZMQ message (also the tests' entry point, without a socket)."""
        try:
            batch = decode_message(frames, unpackb)
        except WireError as error:
            self._bad(str(error))
            return
        rank = batch.rank or 0
        state = self.rank(rank)
        if state.last_seq is not None and batch.seq != state.last_seq + 1:
            if batch.seq <= state.last_seq:
                log.info("kv events %s rank %d: sequence went back (%d after %d): the engine restarted", self.endpoint,
                         rank, batch.seq, state.last_seq)
                state.blocks.clear()
            else:
                state.gaps_total += 1
                state.gap_at_ms = self._clock_ms()
                if not self._replay(state, rank, state.last_seq + 1, batch.seq, unpackb, context):
                    # Removals may be lost: the Proxy gets the whole set again (kept as it is: it is
                    # the best knowledge there is, and unkeyable descendants are skipped and counted).
                    state.blocks.request_reset()
        self._apply(state, rank, batch)

    def _apply(self, state, rank, batch):
        model = self._model(rank)
        if model is None:
            state.blocks.skipped_blocks += sum(len(getattr(e, "block_hashes", ())) for e in batch.events)
        else:
            try:
                state.blocks.apply(batch.events, model)
            except (TypeError, ValueError) as error:  # an unhashable block hash, a token out of range
                self._bad(f"an event the index cannot use ({type(error).__name__}: {str(error)[:80]})")
        state.last_seq = batch.seq
        state.events_total += len(batch.events)
        state.last_event_ms = self._clock_ms()

    def _model(self, rank):
        turn = self._turn_models
        if turn is not None and rank in turn:
            return turn[rank]
        model = self._model_of(rank)
        known = self._models.get(rank)
        if model is None:
            return known  # the engine's scrape failed this time; its model has not changed for that
        if known is not None and model != known:
            log.info("kv events %s rank %d: the engine now serves %s (was %s); starting over", self.endpoint, rank,
                     model, known)
            self.rank(rank).blocks.clear()
        self._models[rank] = model
        if turn is not None:
            turn[rank] = model
        return model

    def _replay(self, state, rank, first, upto, unpackb, context) -> bool:
        """Ask the replay endpoint for batches ``first``..``upto - 1``; True when every one came and applied."""
        if self.replay_endpoint is None or context is None:
            return False
        import zmq

        dealer = context.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        try:
            dealer.connect(rank_endpoint(self.replay_endpoint, rank))
            dealer.send_multipart((b"", first.to_bytes(8, "big")))
            expected = first
            while dealer.poll(REPLAY_TIMEOUT_MS):
                frames = dealer.recv_multipart()
                if len(frames) != 3:
                    break
                seq = parse_seq(frames[1])
                if seq == END_OF_REPLAY:
                    break
                if seq < expected:
                    continue
                if seq != expected or seq >= upto:
                    break
                self._apply(state, rank, decode_payload(seq, frames[2], unpackb))
                expected += 1
            return expected == upto
        except (WireError, zmq.ZMQError) as error:
            self._bad(f"replay: {error}")
            return False
        finally:
            dealer.close(0)

    def _bad(self, reason):
        self.bad_messages += 1
        if self._error_at_ms is None or self._clock_ms() - self._error_at_ms > STATUS_WINDOW_MS:
            log.warning("kv events %s: %s (further bad messages are counted, not logged)", self.endpoint, reason)
        self._note_error(reason)

    def _note_error(self, reason):
        self._error, self._error_at_ms = reason[:200], self._clock_ms()

    # --- the snapshot's object ----------------------------------------------------------

    def figures(self, rank: int) -> dict:
        """SPEC 15.2's ``kv_events`` object of one rank."""
        state = self.rank(rank)
        now = self._clock_ms()
        blocks = state.blocks
        status, error = "ok", None
        if blocks.block_size_mismatch is not None:
            status = "block_size_mismatch"
            error = f"engine block size {blocks.block_size_mismatch} is not a multiple of {self.block_tokens}"
        elif self._error_at_ms is not None and now - self._error_at_ms <= STATUS_WINDOW_MS:
            status, error = "error", self._error
        elif state.gap_at_ms is not None and now - state.gap_at_ms <= STATUS_WINDOW_MS:
            status = "gap"
        elif state.last_event_ms is None:
            status = "no_events"
        return {
            "status": status,
            "error": error,
            "resident_blocks": blocks.resident_blocks,
            "events_total": state.events_total,
            "gaps_total": state.gaps_total,
            "last_event_age_ms": None if state.last_event_ms is None else max(0, now - state.last_event_ms),
            "block_tokens": self.block_tokens,
        }

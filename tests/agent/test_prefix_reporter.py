"""Sending resident prompt blocks to a Proxy (SPEC 15.3): resets, deltas, resync, limits, backoff, re-register.

The Proxy is ``FakeProxy`` over real HTTP on loopback, keeping SPEC 15.3's
epoch and sequence rules; time is a hand-moved clock and ``step()`` is
called directly.
"""

import pytest

from agent.engines.kv_events import Stored
from agent.engines.kv_index import ResidentSet
from agent.prefix_keys import prompt_keys
from agent.prefix_reporter import MAX_ITEMS, PREFIX_BLOCKS_PATH, PrefixReporter
from agent.proxy_client import ProxyClient
from agent.reporter import Backoff
from tests.agent.test_kv_events import MODEL

ENGINE = "http://127.0.0.1:8000"
WALL_MS = 1_767_225_600_000


def stored(hashes, parent, tokens):
    return Stored(hashes, parent, tokens, 16, None, "GPU", None, None)


def reporter_for(proxy, blocks, clock, **kwargs):
    kwargs.setdefault("backoff", Backoff(rand=lambda: 1.0))
    return PrefixReporter(ProxyClient(proxy.url, None, 2.0), lambda: [(ENGINE, blocks)], lambda: "gpu-1", 16,
                          clock=clock.s, clock_wall_ms=lambda: WALL_MS, **kwargs)


@pytest.fixture
def registered(fake_proxy):
    fake_proxy.known.add("gpu-1")
    return fake_proxy


def sent(proxy):
    return proxy.bodies(PREFIX_BLOCKS_PATH)


def test_it_sends_the_whole_set_first_then_changes_at_most_every_250_ms(registered, clock):
    blocks = ResidentSet(16)
    tokens = list(range(64))
    blocks.apply([stored([1, 2], None, tokens[:32])], MODEL)
    reporter = reporter_for(registered, blocks, clock, interval_s=0.25)
    assert reporter.step() == 0.25
    [first] = sent(registered)
    keys = prompt_keys(MODEL, tokens)
    assert first == {"instance_id": "gpu-1", "engine": ENGINE, "epoch": WALL_MS, "seq": 0, "block_tokens": 16,
                     "reset": True, "added": keys[:2], "removed": []}
    clock.advance(250)
    reporter.step()
    assert len(sent(registered)) == 1  # nothing changed: nothing sent
    blocks.apply([stored([3, 4], 2, tokens[32:])], MODEL)
    reporter.step()
    last = sent(registered)[-1]
    assert (last["seq"], last["reset"], sorted(last["added"]), last["removed"]) == (1, False, sorted(keys[2:]), [])
    assert registered.prefix_keys("gpu-1", ENGINE) == set(keys)


def test_a_steady_stream_of_changes_goes_once_a_second_by_default(registered, clock):
    blocks = ResidentSet(16)
    tokens = list(range(16 * 8))
    blocks.apply([stored([1], None, tokens[:16])], MODEL)
    reporter = reporter_for(registered, blocks, clock)
    assert reporter.step() == 1.0  # the whole set went: the next body of changes after the interval
    for n in range(2, 5):  # a change every 250 ms: held back until the second is over
        clock.advance(250)
        blocks.apply([stored([n], n - 1, tokens[(n - 1) * 16:n * 16])], MODEL)
        assert reporter.step() == pytest.approx(1.0 - 0.25 * (n - 1))
        assert len(sent(registered)) == 1
    clock.advance(250)
    blocks.apply([stored([5], 4, tokens[64:80])], MODEL)
    assert reporter.step() == 1.0
    bodies = sent(registered)
    assert [(b["seq"], len(b["added"])) for b in bodies] == [(0, 1), (1, 4)]  # the second's changes in one body
    assert registered.prefix_keys("gpu-1", ENGINE) == set(prompt_keys(MODEL, tokens[:80]))


def test_the_first_change_after_a_quiet_second_goes_at_the_next_look(registered, clock):
    blocks = ResidentSet(16)
    tokens = list(range(48))
    blocks.apply([stored([1], None, tokens[:16])], MODEL)
    reporter = reporter_for(registered, blocks, clock)
    reporter.step()
    clock.advance(1000)
    assert reporter.step() == 0.25  # nothing changed within the interval: looked at every 250 ms
    clock.advance(250)
    blocks.apply([stored([2], 1, tokens[16:32])], MODEL)
    reporter.step()
    assert [b["seq"] for b in sent(registered)] == [0, 1]


def test_a_resync_is_answered_at_the_next_look_not_after_the_interval(registered, clock):
    blocks = ResidentSet(16)
    blocks.apply([stored([1], None, list(range(16)))], MODEL)
    reporter = reporter_for(registered, blocks, clock)
    reporter.step()
    clock.advance(1000)
    registered.resync_next = True
    blocks.apply([stored([2], 1, list(range(16, 32)))], MODEL)
    assert reporter.step() == 0.25  # answered resync: the whole set is due
    clock.advance(250)
    reporter.step()
    assert [(b["seq"], b["reset"]) for b in sent(registered)] == [(0, True), (1, False), (0, True)]


def test_it_starts_a_new_epoch_on_resync_and_every_300_s(registered, clock):
    blocks = ResidentSet(16)
    blocks.apply([stored([1], None, list(range(16)))], MODEL)
    reporter = reporter_for(registered, blocks, clock)
    reporter.step()
    registered.resync_next = True
    blocks.apply([stored([2], 1, list(range(16, 32)))], MODEL)
    clock.advance(1000)
    reporter.step()  # answered resync
    clock.advance(250)
    reporter.step()  # the whole set again, new epoch
    bodies = sent(registered)
    assert [(b["epoch"], b["seq"], b["reset"]) for b in bodies] == [(WALL_MS, 0, True), (WALL_MS, 1, False),
                                                                    (WALL_MS + 1, 0, True)]
    assert len(bodies[-1]["added"]) == 2
    clock.advance(300_000)
    reporter.step()
    assert (sent(registered)[-1]["epoch"], sent(registered)[-1]["reset"]) == (WALL_MS + 2, True)


def test_it_splits_a_large_set_into_one_reset_and_ordinary_bodies(registered, clock):
    blocks = ResidentSet(16)
    count = MAX_ITEMS + 10
    blocks.apply([stored([n + 1], None, [n % 1000, n // 1000] * 8) for n in range(count)], MODEL)
    reporter_for(registered, blocks, clock).step()
    bodies = sent(registered)
    assert [(b["seq"], b["reset"], len(b["added"])) for b in bodies] == [(0, True, MAX_ITEMS), (1, False, 10)]
    assert len(registered.prefix_keys("gpu-1", ENGINE)) == count


def test_it_backs_off_and_starts_over_after_a_failure(registered, clock):
    blocks = ResidentSet(16)
    blocks.apply([stored([1], None, list(range(16)))], MODEL)
    reporter = reporter_for(registered, blocks, clock)
    registered.status = 503
    assert reporter.step() == pytest.approx(0.5)
    assert reporter.step() == pytest.approx(0.5)  # waiting: nothing sent
    assert len(sent(registered)) == 1
    registered.status = None
    clock.advance(500)
    reporter.step()
    bodies = sent(registered)
    assert (bodies[-1]["reset"], bodies[-1]["epoch"]) == (True, WALL_MS + 1)
    assert registered.prefix_keys("gpu-1", ENGINE) == set(prompt_keys(MODEL, list(range(16))))


def test_it_asks_for_a_new_registration_when_the_proxy_forgot_the_instance(fake_proxy, clock):
    blocks = ResidentSet(16)
    blocks.apply([stored([1], None, list(range(16)))], MODEL)
    forgotten = []
    reporter = reporter_for(fake_proxy, blocks, clock, on_unknown_instance=lambda: forgotten.append(True))
    reporter.step()
    assert forgotten == [True]
    fake_proxy.known.add("gpu-1")  # the snapshot reporter registered again
    clock.advance(500)
    reporter.step()
    assert sent(fake_proxy)[-1]["reset"] is True
    assert fake_proxy.prefix_keys("gpu-1", ENGINE) == set(prompt_keys(MODEL, list(range(16))))


def test_a_block_tokens_mismatch_is_logged_and_retried_with_backoff(registered, clock, caplog):
    registered.block_tokens = 32
    blocks = ResidentSet(16)
    blocks.apply([stored([1], None, list(range(16)))], MODEL)
    reporter = reporter_for(registered, blocks, clock)
    assert reporter.step() == pytest.approx(0.5)
    assert "block_tokens must be 32" in caplog.text

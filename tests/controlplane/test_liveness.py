"""Liveness as pure functions of stored timestamps and one ``now`` (SPEC 4).

No database and no clock: every ``now`` is passed in.
"""

import numpy as np
import pytest

from controlplane.endpoints.liveness import (
    Status,
    alive_mask,
    alive_q,
    alive_since,
    alive_sql,
    alive_window,
    heartbeat_interval_for_ttl,
    is_alive,
    status_at,
    status_began_at,
    status_reader,
)

SEEN = 1767225600.0
TTL = 30
INTERVAL = 10  # heartbeat_interval_for_ttl(30)
EPSILON = 0.001


@pytest.mark.parametrize(
    ("ttl_s", "interval"),
    [(0, 1), (1, 1), (2, 1), (3, 1), (5, 1), (6, 2), (9, 3), (12, 4), (29, 9), (30, 10), (31, 10), (60, 10), (3600, 10)],
)
def test_it_hands_out_a_third_of_the_ttl_between_one_and_ten_seconds(ttl_s, interval):
    assert heartbeat_interval_for_ttl(ttl_s) == interval


def test_it_returns_an_int_interval_for_a_float_ttl():
    assert heartbeat_interval_for_ttl(30.9) == 10
    assert isinstance(heartbeat_interval_for_ttl(30.9), int)


def test_it_is_alive_at_exactly_the_ttl():
    assert is_alive(SEEN, SEEN + TTL, TTL) is True


def test_it_is_not_alive_just_past_the_ttl():
    assert is_alive(SEEN, SEEN + TTL + EPSILON, TTL) is False


def test_it_is_alive_when_just_seen():
    assert is_alive(SEEN, SEEN, TTL) is True


def test_it_is_never_alive_without_a_last_seen_time():
    assert is_alive(None, SEEN, TTL) is False
    assert status_at(None, SEEN, TTL, INTERVAL) == Status.STALE


def test_it_gives_one_and_a_half_heartbeat_intervals_before_suspecting():
    assert alive_window(TTL, INTERVAL) == 15.0


def test_it_never_lets_the_alive_window_pass_the_ttl():
    assert alive_window(4, 10) == 4.0


@pytest.mark.parametrize(
    ("age", "expected"),
    [
        (0, Status.ALIVE),
        (INTERVAL, Status.ALIVE),
        (15, Status.ALIVE),  # the end of the alive window is still alive
        (15 + EPSILON, Status.SUSPECT),
        (TTL - EPSILON, Status.SUSPECT),
        (TTL, Status.SUSPECT),  # exactly the TTL: alive, but beats were missed
        (TTL + EPSILON, Status.STALE),
        (10 * TTL, Status.STALE),
    ],
)
def test_it_moves_from_alive_to_suspect_to_stale_with_age(age, expected):
    assert status_at(SEEN, SEEN + age, TTL, INTERVAL) == expected


def test_it_agrees_with_is_alive_on_every_status():
    for age in (0, 14.9, 15.1, 29.9, 30, 30.1, 100):
        status = status_at(SEEN, SEEN + age, TTL, INTERVAL)
        assert (status != Status.STALE) is is_alive(SEEN, SEEN + age, TTL)


@pytest.mark.parametrize(("ttl_s", "interval"), [(TTL, INTERVAL), (2, 1), (0, 1)])
def test_the_reader_of_many_entries_says_what_status_at_and_is_alive_say(ttl_s, interval):
    now = SEEN + 100
    read = status_reader(now, ttl_s, interval)
    for age in (0, 0.1, 1.5, 1.6, 2, 2.1, 14.9, 15, 15.1, 29.9, 30, 30.1, 100):
        seen = now - age
        assert read(seen) == (status_at(seen, now, ttl_s, interval).value, is_alive(seen, now, ttl_s))
    assert read(None) == (Status.STALE.value, False)


def test_it_goes_straight_from_alive_to_stale_when_the_ttl_is_inside_the_window():
    # ttl 2 → interval 1 → window 1.5 s; the TTL still decides staleness.
    assert status_at(SEEN, SEEN + 1.5, 2, 1) == Status.ALIVE
    assert status_at(SEEN, SEEN + 1.6, 2, 1) == Status.SUSPECT
    assert status_at(SEEN, SEEN + 2.1, 2, 1) == Status.STALE


def test_it_names_statuses_with_the_spec_words():
    assert {s.value for s in Status} == {"alive", "suspect", "stale"}


# --- the query forms and the moments of change ------------------------------------------------


def test_it_stamps_each_status_with_the_moment_it_began():
    assert status_began_at(Status.ALIVE, SEEN, TTL, INTERVAL) == SEEN
    assert status_began_at(Status.SUSPECT, SEEN, TTL, INTERVAL) == SEEN + 15
    assert status_began_at(Status.STALE, SEEN, TTL, INTERVAL) == SEEN + TTL


def test_it_begins_each_status_where_status_at_says_it_does():
    for status in Status:
        began = status_began_at(status, SEEN, TTL, INTERVAL)
        assert status_at(SEEN, began + EPSILON, TTL, INTERVAL) == status


def test_it_gives_the_alive_filter_the_same_edge_as_is_alive():
    condition = alive_q(SEEN + TTL, TTL)
    assert condition.children == [("last_seen_at__gte", SEEN)]
    assert alive_since(SEEN + TTL, TTL) == SEEN and is_alive(SEEN, SEEN + TTL, TTL)


def test_it_reaches_the_alive_filter_through_a_relation():
    assert alive_q(SEEN, TTL, prefix="instance__").children == [("instance__last_seen_at__gte", SEEN - TTL)]


def test_it_writes_the_alive_condition_for_raw_sql():
    assert alive_sql('"last_seen_at"') == '"last_seen_at" >= %s'


def test_its_column_mask_agrees_with_is_alive_at_every_age():
    ages = [0.0, EPSILON, TTL - EPSILON, TTL, TTL + EPSILON, 10 * TTL]
    seen = np.array([SEEN - age for age in ages] + [-np.inf, np.nan])
    expected = [is_alive(SEEN - age, SEEN, TTL) for age in ages] + [False, False]
    assert alive_mask(seen, SEEN, TTL).tolist() == expected

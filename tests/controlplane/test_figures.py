"""The one figures module: a number, a count, a share and an unknown, read the same way everywhere. No database."""

import math

import pytest

from controlplane.figures import (
    MAX_DB_INT,
    MISSING,
    as_percent,
    finite,
    in_units,
    percent,
    percent_text,
    ratio,
    whole,
)


@pytest.mark.parametrize("value", [None, True, False, math.nan, math.inf, -math.inf, 10**400, "12", [], {}, object()])
def test_it_reads_no_number_where_json_has_none(value):
    assert finite(value) is None


def test_it_reads_numbers_as_floats():
    assert finite(3) == 3.0 and isinstance(finite(3), float)
    assert finite(-0.5) == -0.5
    assert finite(1e300) == 1e300


@pytest.mark.parametrize("text, expected", [
    ("12.5", 12.5), (" 7 ", 7.0), ("-3", -3.0), ("1e3", 1000.0),
    ("", None), ("n/a", None), ("N/A", None), ("[Not Supported]", None), ("nan", None), ("-Infinity", None),
    ("1e400", None), ("twelve", None),
])
def test_it_reads_numeric_text_when_asked(text, expected):
    assert finite(text, text=True) == expected
    assert finite(text) is None


def test_it_refuses_a_magnitude_past_the_limit():
    assert finite(1e15, limit=1e15) == 1e15
    assert finite(-1e15 * 1.01, limit=1e15) is None
    assert finite("2e15", text=True, limit=1e15) is None


@pytest.mark.parametrize("value, expected", [
    (5, 5), (5.0, 5), (-2, -2), (0, 0), (2**70, 2**70), (5.5, None), (math.nan, None), (math.inf, None),
    (True, None), ("5", None), (None, None),
])
def test_it_reads_a_whole_number_and_nothing_else(value, expected):
    assert whole(value) == expected


def test_it_keeps_a_count_within_its_bounds():
    assert whole(MAX_DB_INT, 0, MAX_DB_INT) == MAX_DB_INT
    assert whole(MAX_DB_INT + 1, 0, MAX_DB_INT) is None
    assert whole(-1, 0, MAX_DB_INT) is None


def test_it_divides_only_what_can_be_divided():
    assert ratio(1, 4) == 0.25
    assert ratio(-1, -4) == 0.25  # a ratio takes any whole but nothing
    assert ratio(None, 4) is None and ratio(1, None) is None and ratio(1, 0) is None


def test_it_writes_a_share_of_a_positive_whole_in_percent():
    assert percent(1, 4) == 25.0
    assert percent(0, 4) == 0.0  # measured: none used
    assert percent(1, 0) is None and percent(1, -4) is None and percent(None, 4) is None
    assert as_percent(0.25) == 25.0 and as_percent(None) is None


def test_it_writes_an_unknown_as_a_dash():
    assert (percent_text(None), percent_text(12.345), percent_text(7, 0)) == (MISSING, "12.3 %", "7 %")
    assert MISSING == "–"


SIZES = ((1024, 1, "MiB", 0), (1024**2, 1024, "GiB", 1), (None, 1024**2, "TiB", 1))


def test_it_writes_a_number_in_the_unit_that_keeps_it_readable():
    assert [in_units(n, SIZES) for n in (512, 1023.4, 1024, 80 * 1024, 3 * 1024**2)] == [
        "512 MiB", "1023 MiB", "1.0 GiB", "80.0 GiB", "3.0 TiB"]
    assert in_units(-2048, SIZES) == "-2.0 GiB"  # placed by its magnitude, a duration too
    durations = ((1, 0.001, "ms", 0), (120, 1, "s", 0), (None, 60, "min", 0))
    assert [in_units(n, durations) for n in (0.028, -0.028, -500)] == ["28 ms", "-28 ms", "-8 min"]


def test_a_tiny_negative_is_written_as_zero_without_a_sign():
    tenths = ((None, 1, "s", 1),)
    assert [in_units(n, tenths) for n in (-0.04, -0.0, 0.04, -0.06)] == [
        "0.0 s", "0.0 s", "0.0 s", "-0.1 s"]

"""Figures as the control planes read and write them: one rule for a number, a share and an unknown.

Snapshots and pool summaries come from many agents and proxies, stored as
they were sent, so every reader is defensive the same way (SPEC 1: null
means unknown, and an unknown is never drawn as 0):

- ``finite(value)``: a JSON number (never a boolean) as a finite float, else
  None. ``text=True`` reads numeric text too ("12.5"; "n/a", "nan" and "inf"
  are None), ``limit`` refuses larger magnitudes as garbage.
- ``whole(value, minimum, maximum)``: an integral number (5 or 5.0, never 5.5)
  as an int within the bounds, else None.
- ``ratio(part, whole)``: part / whole; None when either is unknown or the
  whole is 0. ``percent(part, whole)``: the same in percent, None unless the
  whole is positive (a share of nothing). ``as_percent(ratio)``: a ratio
  (0–1) in percent.
- ``MISSING`` is how an unknown is written, ``percent_text`` a percent as
  people read it, and ``in_units`` a number in the unit of a ladder that
  keeps it readable ("80.0 GiB", "3 min").
"""

import math

MISSING = "–"
# The largest integer the databases store (signed 64-bit).
MAX_DB_INT = 2**63 - 1
# No measured quantity (%, MiB, Mbit/s, ms), weight or rate in this project
# comes near it: a larger value is garbage, and sums and products of
# accepted values stay finite, so the databases and JSON can hold them.
MAX_QUANTITY = 1e15


def finite(value, *, text=False, limit=math.inf):
    """``value`` as a finite float of magnitude at most ``limit``, or None (booleans, None, NaN, ±inf, other types)."""
    kind = type(value)  # not isinstance: a bool is an int, and never a number here
    if kind is str:
        if not text:
            return None
        try:
            value = float(value)  # float() strips white space; "n/a" is a ValueError, "nan" a NaN
        except ValueError:
            return None
    elif kind is int:
        try:
            value = float(value)
        except OverflowError:  # an int past any float
            return None
    elif kind is not float:
        return None
    return value if math.isfinite(value) and abs(value) <= limit else None


def whole(value, minimum=None, maximum=None):
    """An integral number (not a boolean) as an int within ``[minimum, maximum]``, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float):
        if not value.is_integer():  # fractions, NaN and ±inf alike
            return None
        value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        return None
    return value


def ratio(part, whole):
    """part / whole, or None when either is unknown or the whole is 0."""
    if part is None or not whole:
        return None
    return part / whole


def percent(part, whole):
    """part / whole × 100, or None when either is unknown or the whole is not positive."""
    if whole is None or whole <= 0:
        return None
    return as_percent(ratio(part, whole))


def as_percent(share):
    """A ratio (0–1) in percent (0–100); None stays None."""
    return None if share is None else share * 100


def percent_text(value, digits=1):
    """A percent as people read it: "12.3 %"; "–" when unknown."""
    return MISSING if value is None else f"{value:.{digits}f} %"


def in_units(number, ladder):
    """``number`` in the first unit of ``ladder`` that its magnitude stays below: "512 MiB", "80.0 GiB", "28 ms".

    ``ladder`` is ``(below, size, unit, digits)`` from the smallest unit up, the
    last with ``below`` None; ``number / size`` is written with ``digits``.
    """
    for below, size, unit, digits in ladder:
        if below is None or abs(number) < below:
            # A tiny negative rounds to zero: "0.0 s", never "-0.0 s".
            shown = number / size if round(number / size, digits) else 0.0
            return f"{shown:.{digits}f} {unit}"
    raise ValueError("a ladder ends with a unit that takes any number (below=None)")

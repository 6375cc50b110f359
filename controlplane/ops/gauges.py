"""Gauge families declared as tables: one row a family, its meaning and where its value is read.

A row's ``read(*source)`` gives its value from what ``add`` is handed (a
pool summary, an instance's columns, a GPU row). A value that is None is no
sample, never 0 (SPEC 1: an unknown is not drawn). A row with a ``label`` of
its own reads a mapping ``{label value: value}`` instead: one sample each,
such as one gauge per state (``one_of``).
"""

from typing import Callable, NamedTuple

MBIT = 1_000_000


class Gauge(NamedTuple):
    name: str
    documentation: str
    read: Callable
    label: str | None = None


class GaugeTable:
    """The families of ``rows``, named ``prefix + name`` and labelled with ``labels`` and then their own."""

    def __init__(self, make_gauge, prefix, labels, rows):
        self._rows = []
        for row in rows:
            own = [] if row.label is None else [row.label]
            self._rows.append((make_gauge(prefix + row.name, row.documentation, [*labels, *own]), row))

    def add(self, labels, *source):
        """The samples of one source under ``labels`` (its label values, in the order the table was made with)."""
        for family, row in self._rows:
            value = row.read(*source)
            if row.label is None:
                put(family, labels, value)
            else:
                for label, each in value.items():
                    put(family, [*labels, label], each)

    def families(self):
        return tuple(family for family, _ in self._rows)


def put(family, labels, value):
    """A sample of ``value`` under ``labels``; an unknown value (None) is no sample, never 0."""
    if value is not None:
        family.add_metric(labels, value)


def one_of(value, states):
    """One gauge per state: 1 for ``value``'s, 0 for the others; no sample at all when it is none of ``states``."""
    return {state: 1.0 if value == state else 0.0 for state in states} if value in states else {}


def times(value, unit):
    """``value`` in ``unit``s (MiB → bytes, Mbit/s → bits/s), None for None."""
    return None if value is None else value * unit

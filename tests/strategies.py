"""Hypothesis strategies and driver probes that several test modules share."""

from django.db import connection
from hypothesis import strategies as st

# Any JSON value, a few levels deep: what a client may send where an object is expected.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=8,
)


def transaction_open():
    """Whether the driver's connection is inside a transaction (a write not yet committed)."""
    raw = connection.connection
    if connection.vendor == "sqlite":
        return raw.in_transaction
    return raw.info.transaction_status != 0  # psycopg's IDLE

"""Reading one JSON value of a snapshot defensively (SPEC 3.1): a number, a whole number, a word, an object.

Snapshots come from many agent versions; a value that is not what its field
holds is null, never 0 and never an error.
"""

from controlplane.figures import MAX_DB_INT, MAX_QUANTITY, finite


def number(value):
    """A finite float from a JSON value, or None (strict numbers of SPEC 3.1).

    Numeric text counts ("12.5"; agents and nvidia-smi based reporters write
    "N/A", "[Not Supported]", "nan" for no value: None), and a magnitude past
    ``MAX_QUANTITY`` is garbage: summed over a pool it could overflow to
    infinity, which neither the databases nor JSON can hold.
    """
    return finite(value, text=True, limit=MAX_QUANTITY)


def integer(value):
    """Like ``number`` but rounded to an int that fits a BIGINT column."""
    if isinstance(value, int) and not isinstance(value, bool):
        # Exact: going through float would round ids and timestamps past 2**53.
        return value if abs(value) <= MAX_DB_INT else None
    result = number(value)
    if result is None or abs(result) > MAX_DB_INT:
        return None
    return int(round(result))


def text(value, max_length=255):
    if isinstance(value, str) and value.strip():
        return value.strip()[:max_length]
    return None


def mapping(value):
    """The JSON object ``value``, or an empty one for anything else."""
    return value if isinstance(value, dict) else {}

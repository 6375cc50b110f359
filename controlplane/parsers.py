"""Request parsing shared by every endpoint (kept apart from the viewsets
because DRF imports its parser settings while it loads its views)."""

import json
import math
import re

from rest_framework import exceptions
from rest_framework.parsers import JSONParser

# The largest integer the databases store (signed 64-bit).
MAX_DB_INT = 2**63 - 1
# Deeper than any snapshot needs; far below Python's recursion limit, so what
# is accepted can also be stored and rendered back.
MAX_JSON_DEPTH = 64
# Lone surrogates ("\ud800") parse in Python but are not UTF-8: PostgreSQL
# refuses them and the JSON renderer cannot encode them on the way out.
SURROGATE = re.compile("[\ud800-\udfff]")


def find_unstorable(value, path=""):
    """Return the path of a value no database can store, or None.

    JSON accepts ``1e400`` (inf in Python), ``"\\u0000"`` and lone
    surrogates; PostgreSQL rejects NUL and surrogates in text and jsonb, and
    non-finite numbers are not JSON.
    """
    stack = [(path, value, 0)]
    while stack:
        where, item, depth = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return where, "Non-finite numbers (NaN, Infinity) are not allowed."
        elif isinstance(item, str):
            if "\x00" in item:
                return where, "NUL characters are not allowed."
            if SURROGATE.search(item):
                return where, "Unpaired surrogate characters are not allowed."
        elif isinstance(item, (dict, list)) and depth >= MAX_JSON_DEPTH:
            return where, f"Nested deeper than {MAX_JSON_DEPTH} levels."
        elif isinstance(item, dict):
            for key, child in item.items():
                if "\x00" in key:
                    return where, "NUL characters are not allowed in keys."
                if SURROGATE.search(key):
                    return where, "Unpaired surrogate characters are not allowed in keys."
                stack.append((f"{where}.{key}" if where else key, child, depth + 1))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", child, depth + 1) for i, child in enumerate(item))
    return None


# Escapes that can decode to NUL or to half of a surrogate pair; only bodies
# containing one (or nested deeply enough to need the depth check) are walked.
SUSPICIOUS_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


def _strict_constant(name):
    raise ValueError(f"Out of range float values are not JSON compliant: {name}")


def _finite_float(text):
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"Number {text[:32]} is out of range")
    return value


class StrictJSONParser(JSONParser):
    """JSON only, no NaN/Infinity literals, nothing a database would refuse.

    This is on the ingest hot path, so the full ``find_unstorable`` walk runs
    only when a cheap scan of the raw text says it could find something.
    """

    strict = True

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            text = stream.read().decode((parser_context or {}).get("encoding") or "utf-8")
            data = json.loads(text, parse_constant=_strict_constant, parse_float=_finite_float)
        except RecursionError:
            raise exceptions.ParseError("JSON parse error - nested too deeply.") from None
        except ValueError as exc:  # includes UnicodeDecodeError and JSONDecodeError
            raise exceptions.ParseError(f"JSON parse error - {exc}") from None
        nesting = text.count("{") + text.count("[")
        if nesting > MAX_JSON_DEPTH or SUSPICIOUS_ESCAPE.search(text):
            problem = find_unstorable(data)
            if problem:
                where, message = problem
                raise exceptions.ValidationError({where or "body": [message]})
        return data

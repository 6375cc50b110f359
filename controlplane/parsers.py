"""Request parsing shared by every endpoint (kept apart from the viewsets
because DRF imports its parser settings while it loads its views)."""

import math

from rest_framework import exceptions
from rest_framework.parsers import JSONParser

# The largest integer the databases store (signed 64-bit).
MAX_DB_INT = 2**63 - 1


def find_unstorable(value, path=""):
    """Return the path of a value no database can store, or None.

    JSON accepts ``1e400`` (inf in Python) and ``"\\u0000"``; PostgreSQL
    rejects NUL in text and jsonb, and non-finite numbers are not JSON.
    """
    stack = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return where, "Non-finite numbers (NaN, Infinity) are not allowed."
        elif isinstance(item, str):
            if "\x00" in item:
                return where, "NUL characters are not allowed."
        elif isinstance(item, dict):
            for key, child in item.items():
                if "\x00" in key:
                    return where, "NUL characters are not allowed in keys."
                stack.append((f"{where}.{key}" if where else key, child))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", child) for i, child in enumerate(item))
    return None


class StrictJSONParser(JSONParser):
    """JSON only, no NaN/Infinity literals, nothing a database would refuse."""

    strict = True

    def parse(self, stream, media_type=None, parser_context=None):
        data = super().parse(stream, media_type, parser_context)
        problem = find_unstorable(data)
        if problem:
            where, message = problem
            raise exceptions.ValidationError({where or "body": [message]})
        return data



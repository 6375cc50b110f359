"""Request parsing shared by every endpoint (kept apart from the viewsets
because DRF imports its parser settings while it loads its views)."""

import math
import re

import orjson
from rest_framework import exceptions
from rest_framework.parsers import JSONParser

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


# Only a body containing a NUL escape, or nested deeply enough to need the
# depth check, is walked by ``find_unstorable``; orjson itself refuses
# NaN/Infinity literals, numbers that overflow to infinity and lone surrogates.
NUL_ESCAPE = b"\\u0000"


def parse_json_body(raw):
    """A request body as JSON: no NaN/Infinity, nothing a database would refuse.

    On the ingest hot path: orjson parses (about three times faster than the
    standard library here), and the full ``find_unstorable`` walk runs only
    when a cheap scan of the raw bytes says it could find something. Raises
    DRF's ParseError or ValidationError, which every endpoint answers as 400.
    """
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise exceptions.ParseError(f"JSON parse error - {exc}") from None
    if raw.count(b"{") + raw.count(b"[") > MAX_JSON_DEPTH or NUL_ESCAPE in raw:
        problem = find_unstorable(data)
        if problem:
            where, message = problem
            raise exceptions.ValidationError({where or "body": [message]})
    return data


class StrictJSONParser(JSONParser):
    """DRF's parser for every JSON body: ``parse_json_body``."""

    strict = True

    def parse(self, stream, media_type=None, parser_context=None):
        return parse_json_body(stream.read() if stream is not None else b"")

"""A placement body's ``prompt_token_ids`` as SPEC 15.1's packed bytes without a Python int per token.

``parse_placement_body`` answers what ``parse_json_body`` answers, except that
a prompt's token ids arrive as the bytes its keys are computed from (4 each,
little-endian): the C module reads the array (``_token_ids.c``) and orjson
the rest of the body, its place taken by ``null``. Any body the C module does
not read plainly (no such array, one it cannot read, a parse error anywhere)
is parsed whole as every other body is, so errors and their words stay those
of ``parse_json_body``. ``TokenIdsField`` takes either form.
"""

from rest_framework import exceptions

from controlplane.api.parsers import parse_json_body

try:
    from proxy_app.api._token_ids import split
except ImportError:  # pragma: no cover - installed without a C compiler: every body parsed whole
    split = None
COMPILED = split is not None
FIELD = "prompt_token_ids"


def parse_placement_body(raw):
    """``parse_json_body(raw)``, with a top-level ``prompt_token_ids`` array as packed bytes where it can be."""
    found = split(raw) if COMPILED else None
    if found is None:
        return parse_json_body(raw)
    start, end, packed = found
    try:
        data = parse_json_body(raw[:start] + b"null" + raw[end:])
    except exceptions.APIException:
        return parse_json_body(raw)  # the error as the whole body gives it
    data[FIELD] = packed
    return data

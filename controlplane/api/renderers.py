"""JSON out through orjson: DRF's JSONRenderer (the standard library's encoder)
took longer to write a 720-point history answer than the database took to read it."""

import orjson
from rest_framework.renderers import BaseRenderer

INT_RANGE = (-(2**63), 2**64 - 1)  # what orjson writes as an integer


def dumps(data):
    """``data`` as JSON bytes; an integer orjson cannot write is written as the number it is, a float.

    PostgreSQL's jsonb keeps a number as a decimal, so a client's ``1e20`` comes
    back as the integer 100000000000000000000, past orjson's 64 bits (a 500
    before). Only an answer holding one takes the second pass.
    """
    try:
        return orjson.dumps(data)
    except TypeError:
        return orjson.dumps(_big_ints_as_floats(data))


def _big_ints_as_floats(value):
    if isinstance(value, int) and not isinstance(value, bool) and not INT_RANGE[0] <= value <= INT_RANGE[1]:
        return float(value)
    if isinstance(value, dict):
        return {key: _big_ints_as_floats(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_big_ints_as_floats(item) for item in value]
    return value


class ORJSONRenderer(BaseRenderer):
    media_type = "application/json"
    format = "json"
    charset = None  # bytes are UTF-8 JSON; no charset parameter, as DRF's own renderer

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if data is None:
            return b""
        return dumps(data)

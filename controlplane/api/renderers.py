"""JSON out through orjson: DRF's JSONRenderer (the standard library's encoder)
took longer to write a 720-point history answer than the database took to read it."""

import orjson
from rest_framework.renderers import BaseRenderer


class ORJSONRenderer(BaseRenderer):
    media_type = "application/json"
    format = "json"
    charset = None  # bytes are UTF-8 JSON; no charset parameter, as DRF's own renderer

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if data is None:
            return b""
        return orjson.dumps(data)

"""``POST /v1/instance/prefix_blocks`` (SPEC 15.3): an agent's changes to the keys its engine holds.

A ``HotWriteView`` like the other reports an agent sends several times a
second: its body is checked by the declaration the schema publishes
(``proxy_app.api.openapi.prefix.PrefixBlocksSerializer``) through ``BodyChecks``;
each key list is one field checked in one pass (one DRF field per key would
cost more than storing them). ``proxy_app.prefix.store.apply_body`` applies it.
"""

from drf_spectacular.utils import extend_schema_view

from controlplane import clock
from controlplane.api.fields import BodyChecks
from controlplane.api.hot_path import HotWriteView, json_response
from proxy_app.api.openapi.prefix import PrefixBlocksSerializer, prefix_blocks_schema
from proxy_app.api.reports import UNKNOWN_INSTANCE_ANSWER
from proxy_app.prefix.store import Outcome, apply_body

PREFIX_BLOCKS_BODY = BodyChecks(PrefixBlocksSerializer)


@extend_schema_view(post=prefix_blocks_schema)
class PrefixBlocksView(HotWriteView):
    """``POST /v1/instance/prefix_blocks``: scope ``instance``, bound to the token's instance ids."""

    write_scope = "instance"
    # Not counted against the writes' rate limit (a budget per token and instance that snapshots and
    # heartbeats share): an agent sends these at most every 250 ms per engine (SPEC 15.2), each bounded.
    rate_limited = False

    def respond(self, data, grant):
        outcome = apply_body(PREFIX_BLOCKS_BODY(data), clock.now())
        if outcome is Outcome.UNKNOWN:
            return json_response(UNKNOWN_INSTANCE_ANSWER)
        return json_response({"ok": True, "resync": outcome is Outcome.RESYNC})

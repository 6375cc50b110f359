"""``POST /v1/instance/prefix_blocks`` (SPEC 15.3): an agent's changes to the keys its engine holds.

A ``HotWriteView`` like the other reports an agent sends several times a
second: its body is checked by hand (``prefix_body``: the lists may hold
16,384 keys each, one DRF field per key would cost more than storing them),
against the rules of its declared twin
``proxy_app.api.openapi.prefix.PrefixBlocksSerializer``, which the schema publishes. ``proxy_app.prefix.store.apply_body`` applies it.
"""

from django.conf import settings
from drf_spectacular.utils import extend_schema_view
from rest_framework import serializers

from controlplane import clock
from controlplane.api.fields import check_integer, check_text
from controlplane.api.hot_path import HotWriteView, json_response
from controlplane.endpoints.models import NAME_LENGTH
from proxy_app.api.openapi.prefix import ENGINE_LENGTH, MAX_KEYS, prefix_blocks_schema
from proxy_app.api.reports import UNKNOWN_INSTANCE_ANSWER
from proxy_app.api.serializers import INT64_MAX, INT64_MIN, check_integer_list
from proxy_app.prefix.store import Outcome, apply_body


def _check(errors, name, check, *args):
    try:
        return check(*args)
    except serializers.ValidationError as exc:
        errors[name] = list(exc.detail)
        return None


def prefix_body(data):
    """The checked body, else a ``ValidationError`` naming every bad field (nothing is applied)."""
    if not isinstance(data, dict):
        raise serializers.ValidationError({"non_field_errors": ["Expected a JSON object."]})
    errors, body = {}, {}
    for name, check, args in (
        ("instance_id", check_text, (NAME_LENGTH,)),
        ("engine", check_text, (ENGINE_LENGTH,)),
        ("epoch", check_integer, (0, INT64_MAX)),
        ("seq", check_integer, (0, INT64_MAX)),
        ("block_tokens", check_integer, (1, INT64_MAX)),
    ):
        if data.get(name) is None:
            errors[name] = ["This field is required." if name not in data else "This field may not be null."]
        else:
            body[name] = _check(errors, name, check, data[name], *args)
    reset = data.get("reset", False)
    if type(reset) is not bool:
        errors["reset"] = ["Must be a valid boolean."]
    body["reset"] = reset
    for name in ("added", "removed"):
        body[name] = _check(errors, name, check_integer_list, data.get(name, []), INT64_MIN, INT64_MAX, MAX_KEYS)
    expected = settings.FLEETWATCH_PREFIX_BLOCK_TOKENS
    if "block_tokens" not in errors and body["block_tokens"] != expected:
        errors["block_tokens"] = [f"This pool's block size is {expected} tokens (FLEETWATCH_PREFIX_BLOCK_TOKENS); "
                                  f"expected {expected}."]
    if errors:
        raise serializers.ValidationError(errors)
    return body


@extend_schema_view(post=prefix_blocks_schema)
class PrefixBlocksView(HotWriteView):
    """``POST /v1/instance/prefix_blocks``: scope ``instance``, bound to the token's instance ids."""

    write_scope = "instance"
    # Not counted against the writes' rate limit (a budget per token and instance that snapshots and
    # heartbeats share): an agent sends these at most every 250 ms per engine (SPEC 15.2), each bounded.
    rate_limited = False

    def respond(self, data, grant):
        outcome = apply_body(prefix_body(data), clock.now())
        if outcome is Outcome.UNKNOWN:
            return json_response(UNKNOWN_INSTANCE_ANSWER)
        return json_response({"ok": True, "resync": outcome is Outcome.RESYNC})

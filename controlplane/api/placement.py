"""What both control planes' placement endpoints share (SPEC 14.1, 14.3): the body, the answer, the view.

A placement answer is a read sent as a POST: a token of scope ``route`` or
``read``, never throttled (a router asks once per request it routes). Its
status follows the verdict (``accept`` and ``queue`` 200, ``shed`` 429 with
``Retry-After``, ``unavailable`` 503), and when it names candidates it says
where to go in the Gateway API inference extension's header,
``x-gateway-destination-endpoint: host:port[,host:port…]``, best first.
"""

from rest_framework import serializers

from controlplane.api.fields import StrictCharField
from controlplane.api.hot_path import HotWriteView, json_response
from controlplane.api.tokens import Scope
from controlplane.endpoints.models import NAME_LENGTH
from controlplane.endpoints.placement import Verdict

DESTINATION_HEADER = "x-gateway-destination-endpoint"
# The verdict, on the Proxy's GET variant for nginx's auth_request (whose status codes cannot carry it).
VERDICT_HEADER = "x-fleetwatch-verdict"
MAX_EXCLUDE = 64
# How long a shed router should wait: about one report interval of the agents.
SHED_RETRY_AFTER_S = 1
MODEL_LENGTH = 255


def optional_text(max_length):
    return StrictCharField(max_length=max_length, required=False, allow_null=True, default=None,
                           trim_whitespace=False)


class PlacementBodyBase(serializers.Serializer):
    """``model``, ``count`` and ``exclude``: what both placements take (``count``'s bound is the role's)."""

    model = optional_text(MODEL_LENGTH)
    exclude = serializers.ListField(child=StrictCharField(max_length=NAME_LENGTH), max_length=MAX_EXCLUDE,
                                    required=False, default=list)


ANSWERED = frozenset((Verdict.ACCEPT.value, Verdict.QUEUE.value))  # the verdicts whose answer names candidates: ``ok``


def answers_candidates(verdict):
    """``ok`` of a placement answer (``verdict``: its value): true for ``accept`` and ``queue``."""
    return verdict in ANSWERED


def destination(candidates):
    """The header's value: ``host:port`` of each candidate, best first (IPv6 hosts in brackets)."""
    def address(candidate):
        host = candidate["host"]
        return f"[{host}]:{candidate['port']}" if ":" in host and not host.startswith("[") else \
            f"{host}:{candidate['port']}"
    return ",".join(address(candidate) for candidate in candidates)


def placement_response(verdict, body):
    """The HTTP answer of a placement: status from the verdict, the destination header, Retry-After when shedding."""
    headers = {}
    if body["candidates"]:
        headers[DESTINATION_HEADER] = destination(body["candidates"])
    if verdict is Verdict.SHED:
        headers["Retry-After"] = str(SHED_RETRY_AFTER_S)
    response = json_response(body, status=verdict.http_status, headers=headers)
    # A verdict, not a failure: Django's request log would call every shed a warning and every
    # unavailable pool an error, once per request routed.
    response._has_been_logged = True
    return response


class PlacementView(HotWriteView):
    """A placement read: ``route`` or ``read`` scope, no rate limit; ``body_checks`` (the role's body as a
    ``BodyChecks``) and ``answer(data)`` are the role's."""

    write_scope = (Scope.ROUTE.value, Scope.READ.value)
    rate_limited = False
    route_lane = True
    body_checks = None

    def respond(self, data, grant):
        return self.answer(self.body_checks(data))

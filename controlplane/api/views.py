"""``/healthz``: the one API view of the shared base."""

from django.conf import settings
from django.http import JsonResponse
from rest_framework.views import APIView

from controlplane.api.schema.operations import health_schema
from controlplane.api.viewsets import JSONOnlyNegotiation


class Healthz(APIView):
    """Process health, shared by both roles (SPEC 3: ``{"ok", "ttl_s"}``); open to anyone.

    A DRF view only so that the OpenAPI schema describes it: no authentication,
    no permission, no throttle, and the answer is built as before.
    """

    authentication_classes = []
    permission_classes = []
    throttle_classes = []
    content_negotiation_class = JSONOnlyNegotiation

    @health_schema
    def get(self, request):
        if "proxy" in settings.FLEETWATCH_ROLES:
            ttl = settings.FLEETWATCH_INSTANCE_TTL_S
        else:
            ttl = settings.FLEETWATCH_PROXY_TTL_S
        return JsonResponse({"ok": True, "ttl_s": ttl, "roles": settings.FLEETWATCH_ROLES})


healthz = Healthz.as_view()

from django.conf import settings
from django.http import JsonResponse
from django.shortcuts import render


def healthz(request):
    """Process health, shared by both roles (SPEC 3: ``{"ok", "ttl_s"}``)."""
    if "proxy" in settings.FLEETWATCH_ROLES:
        ttl = settings.FLEETWATCH_INSTANCE_TTL_S
    else:
        ttl = settings.FLEETWATCH_PROXY_TTL_S
    return JsonResponse({"ok": True, "ttl_s": ttl, "roles": settings.FLEETWATCH_ROLES})


def home(request):
    """Landing page with links to what this process serves."""
    return render(request, "home.html", {"roles": settings.FLEETWATCH_ROLES})

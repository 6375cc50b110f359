from django.conf import settings
from django.http import JsonResponse
from django.shortcuts import redirect


def healthz(request):
    """Process health, shared by both roles (SPEC 3: ``{"ok", "ttl_s"}``)."""
    if "proxy" in settings.FLEETWATCH_ROLES:
        ttl = settings.FLEETWATCH_INSTANCE_TTL_S
    else:
        ttl = settings.FLEETWATCH_PROXY_TTL_S
    return JsonResponse({"ok": True, "ttl_s": ttl, "roles": settings.FLEETWATCH_ROLES})


def home(request):
    """``/`` (SPEC 8): the fleet when this process is the Scheduler, else its own pool.

    Only a redirect: the page it leads to decides who may look.
    """
    return redirect("fleet" if "scheduler" in settings.FLEETWATCH_ROLES else "pool")

from django.http import JsonResponse
from django.urls import path

from controlplane.urls import handler404, handler500, urlpatterns as fleetwatch_urlpatterns  # noqa: F401


def bare(request):
    """The floor: a Django view that parses nothing and writes nothing."""
    return JsonResponse({"ok": True})


urlpatterns = [path("bench/bare", bare), *fleetwatch_urlpatterns]

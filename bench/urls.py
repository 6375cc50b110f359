from django.http import JsonResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from controlplane.urls import handler404, handler500, urlpatterns as fleetwatch_urlpatterns  # noqa: F401


def bare(request):
    """The floor: a Django view that parses nothing and writes nothing."""
    return JsonResponse({"ok": True})


@csrf_exempt
def bare_read(request):
    """The floor for a POST: read and parse the body, write nothing."""
    import json
    json.loads(request.body)
    return JsonResponse({"ok": True})


urlpatterns = [path("bench/bare", bare), path("bench/bare_read", bare_read), *fleetwatch_urlpatterns]

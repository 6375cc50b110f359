from django.urls import path
from rest_framework.routers import SimpleRouter

from scheduler_app import pages
from scheduler_app.views import FleetDebugViewSet, ProxyViewSet

router = SimpleRouter(trailing_slash=False)
router.register("v1/proxy", ProxyViewSet, basename="proxy")
# proxy_app mounts "debug" too; the action names here differ from its own.
router.register("debug", FleetDebugViewSet, basename="scheduler-debug")

urlpatterns = router.urls

# The dashboards (SPEC 8): pages, and the fragments and chart data they poll.
# A proxy id may hold any character, "/" included: the page ends in "/",
# its fragments in a word without one.
urlpatterns += [
    path("fleet/", pages.fleet_page, name="fleet"),
    path("fleet/summary", pages.fleet_summary, name="fleet-summary"),
    path("fleet/rows", pages.fleet_rows, name="fleet-rows"),
    path("fleet/proxies/<path:proxy_id>/", pages.proxy_page, name="fleet-proxy"),
    path("fleet/proxies/<path:proxy_id>/live", pages.proxy_live, name="fleet-proxy-live"),
    path("fleet/proxies/<path:proxy_id>/series", pages.proxy_series, name="fleet-proxy-series"),
]

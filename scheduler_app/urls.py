from django.urls import path
from rest_framework.routers import SimpleRouter

from scheduler_app import placement_pages
from scheduler_app.pages import FLEET_PAGES
from scheduler_app.placement_api import PoolPlacementView
from scheduler_app.views import FleetDebugViewSet, ProxyViewSet

router = SimpleRouter(trailing_slash=False)
router.register("v1/proxy", ProxyViewSet, basename="proxy")
# proxy_app mounts "debug" too; the action names here differ from its own.
router.register("debug", FleetDebugViewSet, basename="scheduler-debug")

# The API, then the dashboards (SPEC 8): pages, and the fragments and chart data they poll.
urlpatterns = [
    path("v1/proxy/placement", PoolPlacementView.as_view(), name="proxy-placement"),
    *router.urls,
    *FLEET_PAGES.urls(),
    path("fleet/placement", placement_pages.placement_fragment, name="fleet-placement"),
]

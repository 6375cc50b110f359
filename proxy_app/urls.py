from django.urls import path
from rest_framework.routers import SimpleRouter

from proxy_app import agent_pages, pages
from proxy_app.views import InstanceViewSet, PoolDebugViewSet, SnapshotView

router = SimpleRouter(trailing_slash=False)
router.register("v1/instance", InstanceViewSet, basename="instance")
router.register("debug", PoolDebugViewSet, basename="proxy-debug")

urlpatterns = [
    path("v1/instance/resource_snapshot", SnapshotView.as_view(), name="instance-resource-snapshot"),
    *router.urls,
]

# The dashboards (SPEC 8): pages, and the fragments and chart data they poll.
# An instance id may hold any character, "/" included: the page ends in "/",
# its fragments in a word without one, so the two never take each other's URLs.
urlpatterns += [
    path("pool/", pages.pool_page, name="pool"),
    path("pool/summary", pages.pool_summary, name="pool-summary"),
    path("pool/rows", pages.pool_rows, name="pool-rows"),
    path("pool/series", pages.pool_series, name="pool-series"),
    path("pool/instances/<path:instance_id>/", pages.instance_page, name="pool-instance"),
    path("pool/instances/<path:instance_id>/live", pages.instance_live, name="pool-instance-live"),
    path("pool/instances/<path:instance_id>/series", pages.instance_series, name="pool-instance-series"),
    path("agent/", agent_pages.agent_page, name="local-agent"),
    path("agent/status", agent_pages.agent_status, name="local-agent-status"),
    path("agent/start", agent_pages.agent_start, name="local-agent-start"),
    path("agent/stop", agent_pages.agent_stop, name="local-agent-stop"),
]

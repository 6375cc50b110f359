from django.urls import path
from rest_framework.routers import SimpleRouter

from proxy_app.api.debug import PoolDebugViewSet
from proxy_app.api.instances import InstanceViewSet
from proxy_app.api.placement import FeedbackView, InstancePlacementView, PlacementEndpointView
from proxy_app.api.prefix import PrefixBlocksView
from proxy_app.api.reports import HeartbeatView, SnapshotView, UnregisterView
from proxy_app.api.tokenizers import TokenizerFileView, TokenizerOfferView
from proxy_app.pages import agent as agent_pages
from proxy_app.pages import placement_panel
from proxy_app.pages.dashboards import POOL_PAGES

router = SimpleRouter(trailing_slash=False)
router.register("v1/instance", InstanceViewSet, basename="instance")
router.register("debug", PoolDebugViewSet, basename="proxy-debug")

urlpatterns = [
    # HotWriteViews: the hot lane (controlplane/ops/hot_lane.py) answers them below Django's machinery.
    path("v1/instance/resource_snapshot", SnapshotView.as_view(), name="instance-resource-snapshot"),
    path("v1/instance/heartbeat", HeartbeatView.as_view(), name="instance-heartbeat"),
    path("v1/instance/unregister", UnregisterView.as_view(), name="instance-unregister"),
    path("v1/instance/prefix_blocks", PrefixBlocksView.as_view(), name="instance-prefix-blocks"),
    path("v1/instance/tokenizer", TokenizerOfferView.as_view(), name="instance-tokenizer"),
    # Not on the hot lane (a path with a converter): an upload is rare and large.
    path("v1/instance/tokenizer/<str:sha256>", TokenizerFileView.as_view(), name="instance-tokenizer-file"),
    path("v1/placement", InstancePlacementView.as_view(), name="placement"),
    path("v1/placement/feedback", FeedbackView.as_view(), name="placement-feedback"),
    path("v1/placement/endpoint", PlacementEndpointView.as_view(), name="placement-endpoint"),
    *router.urls,
    # The dashboards (SPEC 8): pages, and the fragments and chart data they poll.
    *POOL_PAGES.urls(),
    path("pool/placement", placement_panel.placement_fragment, name="pool-placement"),
    path("agent/", agent_pages.agent_page, name="local-agent"),
    path("agent/status", agent_pages.agent_status, name="local-agent-status"),
    path("agent/start", agent_pages.agent_start, name="local-agent-start"),
    path("agent/stop", agent_pages.agent_stop, name="local-agent-stop"),
]

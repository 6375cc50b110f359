"""Every URL of the app, and the hot writes served again on DRF's own path, for the parity tests.

``/twin/v1/instance/resource_snapshot`` and ``/twin/v1/instance/heartbeat``
are ``SnapshotView``'s and ``HeartbeatView``'s ``respond`` as actions of a
``ControlPlaneViewSet``: what the endpoints would be without ``HotWriteView``.
"""

from django.urls import include, path
from rest_framework.decorators import action
from rest_framework.routers import SimpleRouter

from controlplane.api.viewsets import ControlPlaneViewSet
from proxy_app.api.reports import HeartbeatView, SnapshotView


class SnapshotOnDrf(ControlPlaneViewSet):
    write_scope = SnapshotView.write_scope

    @action(detail=False, methods=["post"])
    def resource_snapshot(self, request):
        return SnapshotView.respond(self, request.data, request.auth)

    @action(detail=False, methods=["post"])
    def heartbeat(self, request):
        return HeartbeatView.respond(self, request.data, request.auth)


router = SimpleRouter(trailing_slash=False)
router.register("twin/v1/instance", SnapshotOnDrf, basename="twin")

urlpatterns = [*router.urls, path("", include("controlplane.urls"))]

handler400 = "controlplane.api.errors.bad_request"
handler404 = "controlplane.api.errors.not_found"
handler500 = "controlplane.api.errors.server_error"

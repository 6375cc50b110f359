"""Every URL of the app, and the snapshot report served again on DRF's own path, for the parity tests.

``/twin/v1/instance/resource_snapshot`` is ``SnapshotView``'s ``post`` as an
action of a ``ControlPlaneViewSet``: what the endpoint would be without
``HotWriteView``.
"""

from django.urls import include, path
from rest_framework.decorators import action
from rest_framework.routers import SimpleRouter

from controlplane.api.viewsets import ControlPlaneViewSet
from proxy_app.views import SnapshotView


class SnapshotOnDrf(ControlPlaneViewSet):
    write_scope = SnapshotView.write_scope

    @action(detail=False, methods=["post"])
    def resource_snapshot(self, request):
        return SnapshotView.post(self, request)


router = SimpleRouter(trailing_slash=False)
router.register("twin/v1/instance", SnapshotOnDrf, basename="twin")

urlpatterns = [*router.urls, path("", include("controlplane.urls"))]

handler400 = "controlplane.api.errors.bad_request"
handler404 = "controlplane.api.errors.not_found"
handler500 = "controlplane.api.errors.server_error"

from rest_framework.routers import SimpleRouter

from scheduler_app.views import FleetDebugViewSet, ProxyViewSet

router = SimpleRouter(trailing_slash=False)
router.register("v1/proxy", ProxyViewSet, basename="proxy")
# proxy_app mounts "debug" too; the action names here differ from its own.
router.register("debug", FleetDebugViewSet, basename="scheduler-debug")

urlpatterns = router.urls

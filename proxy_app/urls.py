from rest_framework.routers import SimpleRouter

from proxy_app.views import InstanceViewSet, PoolDebugViewSet

router = SimpleRouter(trailing_slash=False)
router.register("v1/instance", InstanceViewSet, basename="instance")
router.register("debug", PoolDebugViewSet, basename="proxy-debug")

urlpatterns = router.urls

"""URL sets mounted by role (``FLEETWATCH_ROLES``).

Each role's app (an AppConfig with ``role``) brings its ``urls`` module. The
role APIs come first: Django tries patterns in order, and the agents'
snapshot and heartbeat posts are by far the most frequent requests.
"""

from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from controlplane.api.views import healthz
from controlplane.ops.metrics import MetricsView
from controlplane.ops.readiness import readyz
from controlplane.ops.roles import role_apps
from controlplane.pages.layout import home

urlpatterns = [path("", include(f"{config.name}.urls")) for config in role_apps(settings.FLEETWATCH_ROLES)]

urlpatterns += [
    path("", home, name="home"),
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    # Browsers ask for it on every page, the admin's login page included.
    path("favicon.ico", RedirectView.as_view(url="/static/fleetwatch/favicon.svg", permanent=True)),
    path("metrics", MetricsView.as_view(), name="metrics"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("admin/", admin.site.urls),
]

handler400 = "controlplane.api.errors.bad_request"
handler404 = "controlplane.api.errors.not_found"
handler500 = "controlplane.api.errors.server_error"

"""URL sets mounted by role (``FLEETWATCH_ROLES``)."""

from django.conf import settings
from django.contrib import admin
from django.urls import include, path

from controlplane.views import healthz, home

urlpatterns = [
    path("", home, name="home"),
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
]

if "proxy" in settings.FLEETWATCH_ROLES:
    urlpatterns.append(path("", include("proxy_app.urls")))
if "scheduler" in settings.FLEETWATCH_ROLES:
    urlpatterns.append(path("", include("scheduler_app.urls")))

handler404 = "controlplane.views.not_found"
handler500 = "controlplane.views.server_error"

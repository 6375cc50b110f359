"""URL sets mounted by role (``FLEETWATCH_ROLES``).

The role APIs come first: Django tries patterns in order, and the agents'
snapshot and heartbeat posts are by far the most frequent requests.
"""

from django.conf import settings
from django.contrib import admin
from django.urls import include, path

from controlplane.views import healthz, home

urlpatterns = []
if "proxy" in settings.FLEETWATCH_ROLES:
    urlpatterns.append(path("", include("proxy_app.urls")))
if "scheduler" in settings.FLEETWATCH_ROLES:
    urlpatterns.append(path("", include("scheduler_app.urls")))

urlpatterns += [
    path("", home, name="home"),
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
]

handler404 = "controlplane.views.not_found"
handler500 = "controlplane.views.server_error"

"""What ``up`` serves: the hot lane (``controlplane.ops.hot_lane``) in front of Django's WSGI handler, each answer
given before the request's body was read saying ``Connection: close`` (``controlplane.ops.unread_body``), each
request's arrival noted for the route lane's gate (``controlplane.api.route_gate``)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django_application = get_wsgi_application()

from controlplane.api.route_gate import stamp_arrival  # noqa: E402
from controlplane.ops.hot_lane import HotLane  # noqa: E402 - needs the apps that get_wsgi_application set up
from controlplane.ops.unread_body import ClosingUnreadBodies  # noqa: E402

lane = HotLane(django_application)
application = ClosingUnreadBodies(stamp_arrival(lane))

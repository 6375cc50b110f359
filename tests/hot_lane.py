"""The hot lane as a test client: Django's test client, whose requests to a lane route go through the hot lane over WSGI.

A test module marked ``both_entry_points`` runs each of its tests twice
(``tests/conftest.py``): through Django's test client as ever, and through
``HotLaneClient``, which builds the same WSGI environ, calls the hot lane callable
(``controlplane.ops.hot_lane.HotLane``) as a server would, reads the status line,
headers and body it answers, and hands back a response the test reads as
any other. Requests the hot lane hands to Django take Django's test path.
"""

from functools import partial

from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.http import HttpResponse
from django.test import Client

from controlplane.ops.hot_lane import HotLane


class HotLaneClient(Client):
    """``django.test.Client`` with the hot lane in front, as ``up`` serves it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lane = HotLane(WSGIHandler())
        self.lane_answers = 0  # how many requests the hot lane itself answered

    def request(self, **request):
        environ = self._base_environ(**request)
        if self.lane.route_of(environ) is None:
            return super().request(**request)
        answered = {}

        def start_response(status, headers):
            answered["status"], answered["headers"] = status, headers

        # As Django's test handler does: the test's transaction keeps its connection, so
        # close_old_connections is off the request signals while the lane answers.
        request_started.disconnect(close_old_connections)
        request_finished.disconnect(close_old_connections)
        try:
            body = self.lane(environ, start_response)
            content = b"".join(body)
            body.close()
        finally:
            request_started.connect(close_old_connections)
            request_finished.connect(close_old_connections)
        self.lane_answers += 1
        response = HttpResponse(content, status=int(answered["status"].split(" ", 1)[0]))
        for name in list(response.headers):
            del response.headers[name]
        for name, value in answered["headers"]:
            response.headers[name] = value
        response.client, response.request, response.wsgi_request = self, request, None
        response.json = partial(self._parse_json, response)
        return response

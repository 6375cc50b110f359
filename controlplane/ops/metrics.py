"""``/metrics`` in the Prometheus text format (SPEC 11), right under several web processes.

Two kinds of figures:

- The fleet's state is read from the database at scrape time by collectors
  that each role's app declares (``AppConfig.metrics_collector``), so every
  web process answers the same and nothing has to be kept in step. An
  unknown value is an absent sample, never 0.
- Requests are counted by ``RequestMetricsMiddleware`` in this process.
  Under ``manage.py up`` every web process writes them to files in
  ``PROMETHEUS_MULTIPROC_DIR`` (prometheus_client's multiprocess mode) and a
  scrape of any process sums them all.
"""

import os
import platform
import time
from importlib import metadata

from django.conf import settings
from django.utils.module_loading import import_string
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily
from rest_framework.renderers import BaseRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api.auth import BearerTokenAuthentication, ScopedAccess, StaffSessionAuthentication
from controlplane.api.schema.errors import ERROR_HEADERS, read_errors
from controlplane.api.viewsets import MethodFirstMixin
from controlplane.ops.roles import role_apps

REQUESTS = Counter("fleetwatch_http_requests", "HTTP requests answered.", ["view", "method", "status"])
DURATION = Histogram(
    "fleetwatch_http_request_duration_seconds", "Time to answer an HTTP request, by route (the view's URL name).",
    ["route"], buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
STATIC_PREFIX = "/" + settings.STATIC_URL.lstrip("/")
# Any other method a client sends is counted as "other": the label's values stay bounded.
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def view_label(request):
    """The ``view`` label of an answer (and the ``route`` of its latency): its URL name; ``static`` for the
    static files (WhiteNoise answers them before any URL is resolved), ``unmatched`` for any other path no
    URL names. Bounded by the URLconf."""
    match = request.resolver_match
    if match:
        return match.url_name or match.view_name
    return "static" if request.path_info.startswith(STATIC_PREFIX) else "unmatched"


class RequestMetricsMiddleware:
    """Counts every answer by view name, method and status; times it by route."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        count_answer(view_label(request), request.method, response.status_code, started)
        return response


_children = {}  # (route, method, status) -> the counter's and the histogram's children, found once


def count_answer(route, method, status, started):
    """Count one answer and time it from ``started`` (``perf_counter``): the middleware's rule, and the hot lane's."""
    key = (route, method if method in KNOWN_METHODS else "other", status)
    children = _children.get(key)
    if children is None:  # bounded: the URLconf's names, KNOWN_METHODS, the status codes
        children = _children[key] = (REQUESTS.labels(route, key[1], str(status)), DURATION.labels(route))
    children[0].inc()
    children[1].observe(time.perf_counter() - started)


class BuildInfo:
    """``fleetwatch_build_info``: 1, labelled with the versions this process runs and its roles."""

    def __init__(self, roles):
        self.roles = ",".join(roles)

    def collect(self):
        import django

        family = GaugeMetricFamily("fleetwatch_build_info", "1; the labels say what this process runs.",
                                   labels=["version", "python", "django", "roles"])
        family.add_metric([_version(), platform.python_version(), django.get_version(), self.roles], 1.0)
        yield family


def _version():
    try:
        return metadata.version("fleetwatch")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


class PrometheusRenderer(BaseRenderer):
    media_type = "text/plain"
    format = "prometheus"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data


def fleet_registry(settings_roles):
    """A registry holding this process's request metrics (or every process's) and the fleet's state."""
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = CollectorRegistry()
        registry.register(_Forward(REGISTRY))
    registry.register(BuildInfo(settings_roles))
    for config in role_apps(settings_roles):
        path = getattr(config, "metrics_collector", None)
        if path:
            registry.register(import_string(path)())
    return registry


class _Forward:
    """The process's default registry (request metrics) inside a registry of one scrape."""

    def __init__(self, registry):
        self.registry = registry

    def collect(self):
        return self.registry.collect()


class MetricsView(MethodFirstMixin, APIView):
    """``GET /metrics``: any valid token or a staff session may read it (SPEC 10)."""

    authentication_classes = [BearerTokenAuthentication, StaffSessionAuthentication]
    permission_classes = [ScopedAccess]
    renderer_classes = [PrometheusRenderer]
    write_scope = None

    @extend_schema(
        operation_id="metrics", summary="Prometheus metrics",
        description="The fleet's state and the request counters, in the Prometheus text format (SPEC 11)."
                    "\n\nNeeds a token of any scope, or a staff session.",
        parameters=ERROR_HEADERS,
        responses={(200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="Prometheus exposition text"),
                   **read_errors()},
    )
    def get(self, request):
        from django.conf import settings

        body = generate_latest(fleet_registry(settings.FLEETWATCH_ROLES))
        return Response(body, content_type=CONTENT_TYPE_LATEST)

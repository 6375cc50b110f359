"""Instances register, are listed and read over time (SPEC 3, 9); their reports are ``proxy_app.api.reports``'."""

import orjson
from django.http import HttpResponse
from rest_framework import exceptions
from rest_framework.decorators import action
from rest_framework.response import Response

from controlplane import clock
from controlplane.api.rows import answers_of
from controlplane.api.viewsets import ControlPlaneViewSet, query_bool, query_id
from proxy_app.api.listing import instance_list_json
from proxy_app.api.openapi import instance_schema
from proxy_app.api.openapi.answers import INSTANCE_HISTORY, InstanceRegistered
from proxy_app.api.serializers import RegisterSerializer
from proxy_app.models import Instance
from proxy_app.ops.history import INSTANCES

# The register and history answers, built from the serializers the schema publishes (``controlplane.api.rows``).
REGISTERED, HISTORY = answers_of(InstanceRegistered, INSTANCE_HISTORY)


@instance_schema
class InstanceViewSet(ControlPlaneViewSet):
    """Instances register and are listed (their heartbeats, snapshots and unregisters: the views above)."""

    write_scope = "instance"

    @action(detail=False, methods=["post"])
    def register(self, request):
        data = self.validated(RegisterSerializer)
        instance = Instance.objects.register(now=clock.now(), **data)
        return Response(REGISTERED(
            instance_id=instance.instance_id, heartbeat_interval_s=Instance.heartbeat_interval_s(),
            ttl_s=Instance.ttl_s(), capability_fingerprint=instance.capability_fingerprint,
        ))

    @action(detail=False, methods=["get"], url_path="list")
    def list_instances(self, request):
        now = clock.now()
        instances = Instance.objects.in_view(query_bool(request, "include_dead", False), now)
        if not request.query_params.keys() & {"limit", "offset"}:
            # The bare array as encoded: DRF's renderer would copy its 31 MB (10,000 instances) once more.
            return HttpResponse(instance_list_json(instances, now), content_type="application/json")
        return self.rows_response(instances, lambda page: orjson.Fragment(instance_list_json(page, now)))

    @action(detail=False, methods=["get"])
    def history(self, request):
        """An instance's figures over a range (SPEC 9); 404 for an instance never seen."""
        instance_id = query_id(request, "instance_id")
        if not Instance.objects.filter(pk=instance_id).exists() and not INSTANCES.has(instance_id):
            raise exceptions.NotFound({"instance_id": ["Unknown instance."]})
        return self.series_response(INSTANCES, HISTORY, instance_id, instance_id=instance_id)

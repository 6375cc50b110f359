"""What agents send every second (SPEC 3): snapshots, heartbeats, unregisters, each a ``HotWriteView``.

A snapshot's way from here to its SQL: ``SNAPSHOT_BODY`` checks the body by the rules of its declared serializer
(``proxy_app.api.openapi.bodies.Snapshot``, which the schema publishes; ``controlplane.api.fields.BodyChecks``),
``ingest_snapshot`` (``proxy_app.ingest.store``) normalises it (``proxy_app.ingest.normalise``) and stores it with
the statements of ``proxy_app.ingest.sql``. Each report goes through the process's group commit
(``controlplane.api.group_commit.REPORTS``): the reports that arrive together share one transaction, and each
is answered once it has committed.
"""

import functools

from drf_spectacular.utils import extend_schema_view

from controlplane import clock
from controlplane.api.fields import BodyChecks
from controlplane.api.group_commit import REPORTS
from controlplane.api.hot_path import HotWriteView, json_response, ok_response
from controlplane.api.rows import answers_of
from controlplane.api.serializers import HeartbeatSerializerBase
from proxy_app.api.openapi import heartbeat_schema, snapshot_schema, unregister_schema
from proxy_app.api.openapi.answers import CapabilityFingerprintRejected, SnapshotAccepted, UnknownInstance, Unregistered
from proxy_app.api.openapi.bodies import InstanceHeartbeat, InstanceId, Snapshot
from proxy_app.ingest.store import IngestResult, ingest_snapshot
from proxy_app.managers import Heartbeat
from proxy_app.models import Instance

# The answers, built from the serializers the schema publishes (``controlplane.api.rows``); the constant ones
# once here: the unknown instance's compat body, a late snapshot's (``stale``, its one optional key, present).
UNKNOWN_INSTANCE_ANSWER, STALE_ANSWER = (answer() for answer in answers_of(UnknownInstance, SnapshotAccepted))
REJECTED, UNREGISTERED = answers_of(CapabilityFingerprintRejected, Unregistered)
# Each body's rules, declared once (the schema's serializers) and run as one plain loop per report.
SNAPSHOT_BODY = BodyChecks(Snapshot)
HEARTBEAT_BODY = BodyChecks(InstanceHeartbeat)
UNREGISTER_BODY = BodyChecks(InstanceId)


@extend_schema_view(post=snapshot_schema)
class SnapshotView(HotWriteView):
    """``POST /v1/instance/resource_snapshot``: most of a Proxy's traffic, so a ``HotWriteView``."""

    write_scope = "instance"

    def respond(self, data, grant):
        data = SNAPSHOT_BODY(data)
        result = REPORTS.commit(functools.partial(
            ingest_snapshot, data["instance_id"], data["snapshot"], data["metadata"], clock.now()))
        if result is IngestResult.UNKNOWN:
            return json_response(UNKNOWN_INSTANCE_ANSWER)
        if result is IngestResult.STALE:
            return json_response(STALE_ANSWER)
        return ok_response()


@extend_schema_view(post=heartbeat_schema)
class HeartbeatView(HotWriteView):
    """``POST /v1/instance/heartbeat``: every instance's second write, so a ``HotWriteView`` too."""

    write_scope = "instance"

    def respond(self, data, grant):
        data = HEARTBEAT_BODY(data)
        outcome, stored = REPORTS.commit(functools.partial(
            Instance.objects.heartbeat, data["instance_id"], clock.now(), HeartbeatSerializerBase.load(data),
            capabilities=data.get("capabilities"), reported_fingerprint=data.get("capability_fingerprint"),
        ))
        if outcome is Heartbeat.OK:
            return ok_response()
        if outcome is Heartbeat.UNKNOWN_INSTANCE:
            return json_response(UNKNOWN_INSTANCE_ANSWER)
        # The original's answer: the instance re-sends its capabilities.
        return json_response(REJECTED(error=outcome.value, stored=stored,
                                      reported_fingerprint=data["capability_fingerprint"]))


@extend_schema_view(post=unregister_schema)
class UnregisterView(HotWriteView):
    """``POST /v1/instance/unregister``: a whole pool may leave at once (a deploy), so a ``HotWriteView``."""

    write_scope = "instance"

    def respond(self, data, grant):
        data = UNREGISTER_BODY(data)
        unregister = functools.partial(Instance.objects.unregister, data["instance_id"], clock.now())
        return json_response(UNREGISTERED(ok=REPORTS.commit(unregister)))

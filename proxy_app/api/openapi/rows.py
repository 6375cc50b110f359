"""The Proxy's answer rows, declared once (SPEC 3, 3.1): each key with its type and description for the
schema, and how the builders of ``proxy_app.api.listing`` read its value (``controlplane.api.rows``).

``/v1/instance/list`` (``InstanceRow``), ``/debug/instance_resources``
(``InstanceResourceRow``) and ``/debug/instance_loads`` (``InstanceLoadRow``)
are built by the ``RowShape`` of these serializers, and the schema publishes
the same serializers, so a key is written here and nowhere else.
"""

from django.db.models import F, Func, TextField
from rest_framework import serializers

from controlplane.api.rows import Annotated, Text, alive_field, always, reads
from controlplane.api.schema.answers import RegisteredEntryRow, nullable_integer, nullable_number
from controlplane.api.schema.parts import Const
from controlplane.series.queries import as_text
from proxy_app.api.openapi.bodies import CapabilitiesFullView
from proxy_app.ingest.normalise import RESOURCE_FIELDS
from proxy_app.models import InstanceResource
from proxy_app.pool.least_load import QUEUE_KEYS, UNAVAILABLE, least_load_score

# The context functions a builder of these rows is given (``listing``): the fence of a row's stored
# flags and report figures, and the full view of its stored capabilities.
FENCE, CAPABILITIES = "fence", "capabilities"
FENCE_INPUTS = ("fenced", "fence_reason", "had_ok_engine", "resource__engine_count", "resource__engine_ok_count",
                "resource__engine_status", "resource__gpu_error_count")


class SnapshotText(Func):
    """The snapshot as stored; ``{}`` before the first one, also where one is left without its resource row."""

    output_field = TextField()

    def __init__(self):
        super().__init__(F("resource__instance_id"), as_text("snapshot__raw_resource", null="{}"))

    def as_sql(self, compiler, connection, **extra_context):
        (resource_id, resource_params), (snapshot, snapshot_params) = map(compiler.compile, self.source_expressions)
        return f"CASE WHEN {resource_id} IS NULL THEN '{{}}' ELSE {snapshot} END", (*resource_params, *snapshot_params)


def fingerprint_field(help_text):
    """A stored capability fingerprint (SPEC 3.2), or null."""
    return serializers.RegexField(r"^sha256:[0-9a-f]{64}$", allow_null=True, help_text=help_text)


class InstanceResourceFigures(serializers.ModelSerializer):
    """An instance's latest snapshot normalised (SPEC 3.1): every field null before the first
    snapshot, and null wherever the snapshot had no finite number (never 0 for unknown)."""

    admission_state = serializers.CharField(allow_null=True, read_only=True, help_text=(
        "capacity_hint.admission_state lower-cased: accepting, degraded, rejecting, or another word an "
        "agent sent."
    ))
    engine_status = serializers.CharField(allow_null=True, read_only=True, help_text=(
        "The worst status of the host's engines (SPEC 13): unreachable, timeout, http_error, bad_format or ok; "
        "null without engines."
    ))
    engine_models = serializers.ListField(child=serializers.CharField(), allow_null=True, read_only=True,
                                          help_text="The engines' model names, sorted and distinct; null without "
                                                    "engines.")
    engine_loras = serializers.ListField(child=serializers.CharField(), allow_null=True, read_only=True,
                                         help_text="The LoRA adapters the ok engines run, sorted and distinct (at most "
                                                   "64); null without engines.")

    class Meta:
        model = InstanceResource
        fields = RESOURCE_FIELDS
        read_only_fields = RESOURCE_FIELDS


class InstanceResourceWithRaw(InstanceResourceFigures):
    """SPEC 3.1 as list rows show it: the columns and the snapshot as sent."""

    raw_resource = reads(serializers.DictField(read_only=True, help_text="The snapshot as sent; {} before the first."),
                         Annotated("raw_text", SnapshotText()))

    class Meta(InstanceResourceFigures.Meta):
        fields = (*RESOURCE_FIELDS, "raw_resource")


class InstanceLoad(serializers.Serializer):
    """From heartbeats; null until the instance reports it."""

    inflight = nullable_integer()
    qps_1m = nullable_number()
    gpu_util = nullable_number()


class InstanceRow(RegisteredEntryRow):
    """One row of `/v1/instance/list`."""

    instance_id = reads(serializers.CharField(), leads=True)
    capabilities = reads(CapabilitiesFullView(), Text("capabilities", null=None), "capability_fingerprint",
                         using=CAPABILITIES)
    capability_fingerprint = fingerprint_field("Of the stored capabilities; null without.")
    load = InstanceLoad()
    fenced = reads(serializers.BooleanField(help_text="Kept out of placement (SPEC 14.2): by router errors, an engine "
                                                      "that went down or a GPU in error, until it recovers."),
                   *FENCE_INPUTS, using=FENCE, item=0)
    fence_reason = reads(serializers.CharField(allow_null=True, help_text="Why it is fenced; null when it is not."),
                         *FENCE_INPUTS, using=FENCE, item=1)
    resource = reads(InstanceResourceWithRaw(), prefix="resource__")


class InstanceResourceRow(serializers.Serializer):
    instance_id = serializers.CharField()
    host = serializers.CharField()
    port = serializers.IntegerField()
    last_seen_at = serializers.FloatField()
    is_alive = alive_field(serializers.BooleanField())
    resource = reads(InstanceResourceFigures(), prefix="resource__")


def figure_map(help_text):
    return serializers.DictField(child=serializers.FloatField(), help_text=help_text)


class LeastLoadScore(serializers.Serializer):
    """The original Proxy's least-load score: each known signal times its weight, summed. Unknown
    signals are left out (never 0); with none known the total is null."""

    total = nullable_number("Sum of `weighted_components`; null when no signal is known.")
    components = figure_map("The known signals: `inflight` and `qps_1m` from heartbeats (never a queue figure "
                            "here: no queue manager).")
    weighted_components = figure_map("Each known signal with a non-zero weight, times its weight.")
    source = serializers.DictField(child=serializers.CharField(), help_text="Where each component came from.")
    queue_source = Const(UNAVAILABLE, help_text="This Proxy runs no queue manager.")
    weights = figure_map("The original's default weights (inflight 1, qps_1m 0, the queue figures).")


InstanceLoadRow = type("InstanceLoadRow", (InstanceLoad,), {
    "__doc__": "One instance's load; the original's queue figures are null (no queue manager here).",
    "instance_id": reads(serializers.CharField(), leads=True),
    "is_alive": alive_field(serializers.BooleanField(), leads=True),
    "last_seen_at": serializers.FloatField(),
    **{key: always(nullable_number("Always null: this Proxy runs no queue manager."), None) for key in QUEUE_KEYS},
    "least_load_score": reads(LeastLoadScore(), "inflight", "qps_1m", using=least_load_score),
})

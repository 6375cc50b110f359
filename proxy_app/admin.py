from django.contrib import admin
from django.urls import NoReverseMatch, reverse

from controlplane.clock import ago, date_and_age
from controlplane.endpoints.admin import ReadOnlyAdminMixin, RegisteredEndpointAdmin, StatusChangeAdmin, pretty_json
from controlplane.figures import MISSING, percent_text
from controlplane.series.admin import MinuteRollupAdmin, SeriesPointAdmin
from proxy_app.models import (
    Instance,
    InstanceMinute,
    InstanceResource,
    InstanceSample,
    InstanceStatusChange,
    PoolResource,
    PoolResourceMinute,
    PrefixEngine,
    TokenizerFile,
    TokenizerOffer,
)
from proxy_app.placement.fence_store import fence_of
from proxy_app.tokenizers.files import TOKENIZER_JSON


@admin.register(Instance)
class InstanceAdmin(RegisteredEndpointAdmin):
    """Instances come from their agents: no "Add", nothing to edit, deletes unregister."""

    list_display = ("instance_id", "address", "live_status", "last_seen", "cpu", "gpu", "admission", "fence",
                    "weight")
    list_filter = ("status", "resource__admission_state", "fenced")
    list_select_related = ("resource",)
    extra_fields = ("capabilities_json", "raw_snapshot")

    def view_on_site(self, obj):
        """The change page's "View on site" button opens the instance's dashboard page."""
        try:
            return reverse("pool-instance", args=[obj.pk])
        except NoReverseMatch:  # this process does not serve the proxy role's pages
            return None

    @admin.display(description="CPU", ordering="resource__cpu_util")
    def cpu(self, obj):
        resource = obj.latest_resource
        return percent_text(resource.cpu_util) if resource else MISSING

    @admin.display(description="GPU util", ordering="resource__gpu_util_avg")
    def gpu(self, obj):
        resource = obj.latest_resource
        return percent_text(resource.gpu_util_avg) if resource else MISSING

    @admin.display(description="admission", ordering="resource__admission_state")
    def admission(self, obj):
        resource = obj.latest_resource
        return (resource.admission_state or MISSING) if resource else MISSING

    @admin.display(description="fenced", ordering="fenced")
    def fence(self, obj):
        """As placement sees it (SPEC 14.2): the stored fence, or a report's trouble not swept yet."""
        fenced, reason = fence_of(obj)
        return f"fenced: {reason}" if fenced else "–"

    @admin.display(description="capabilities")
    def capabilities_json(self, obj):
        return pretty_json(obj.capabilities)

    @admin.display(description="latest snapshot")
    def raw_snapshot(self, obj):
        return pretty_json(obj.raw_resource) if obj.latest_resource else MISSING


@admin.register(InstanceResource)
class InstanceResourceAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "instance", "reported", "cpu_util", "memory_free_ratio", "gpu_count", "gpu_util_avg",
        "gpu_util_max", "admission_state", "report_seq",
    )
    list_filter = ("admission_state", "gpu_sample_quality")
    search_fields = ("instance__instance_id", "instance__host")
    # Epoch columns are shown as dates instead; the raw snapshot as JSON.
    EPOCH_FIELDS = ("resource_reported_at", "resource_ts_ms", "resource_report_wall_time_ms",
                    "agent_snapshot_timestamp_ms")

    def get_fields(self, request, obj=None):
        columns = [f.name for f in InstanceResource._meta.concrete_fields
                   if f.name not in (*self.EPOCH_FIELDS, "has_raw_resource")]
        return (*columns, "reported_detail", "snapshot_time", "report_wall_time", "raw_json")

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj)

    @admin.display(description="reported", ordering="resource_reported_at")
    def reported(self, obj):
        return ago(obj.resource_reported_at)

    @admin.display(description="received by this proxy")
    def reported_detail(self, obj):
        return date_and_age(obj.resource_reported_at)

    @admin.display(description="snapshot taken (agent clock)")
    def snapshot_time(self, obj):
        return date_and_age(None if obj.resource_ts_ms is None else obj.resource_ts_ms / 1000)

    @admin.display(description="report sent (agent clock)")
    def report_wall_time(self, obj):
        wall = obj.resource_report_wall_time_ms
        return date_and_age(None if wall is None else wall / 1000)

    @admin.display(description="raw snapshot")
    def raw_json(self, obj):
        return pretty_json(obj.instance.raw_resource)


@admin.register(PrefixEngine)
class PrefixEngineAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Each engine stream of the pool prefix index (SPEC 15.4): how many blocks it holds, where its agent's
    epoch and seq stand. Written by the agents' ``prefix_blocks`` bodies only."""

    list_display = ("instance", "engine", "blocks", "epoch", "seq", "changed")
    search_fields = ("instance__instance_id", "engine")
    ordering = ("instance", "engine")

    @admin.display(description="last body", ordering="changed_at")
    def changed(self, obj):
        return ago(obj.changed_at)


@admin.register(InstanceStatusChange)
class InstanceStatusChangeAdmin(StatusChangeAdmin):
    entry_field = "instance_id"


@admin.register(InstanceSample)
class InstanceSampleAdmin(SeriesPointAdmin):
    pass


@admin.register(InstanceMinute)
class InstanceMinuteAdmin(MinuteRollupAdmin):
    pass


@admin.register(PoolResource)
class PoolResourceAdmin(SeriesPointAdmin):
    extra_fields = ("summary_json",)

    @admin.display(description="pool summary")
    def summary_json(self, obj):
        return pretty_json(obj.summary)


@admin.register(PoolResourceMinute)
class PoolResourceMinuteAdmin(MinuteRollupAdmin):
    pass


@admin.register(TokenizerOffer)
class TokenizerAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The tokenizers agents offered (SPEC 16.2 (b)): one row per instance and model, with the digest of its
    tokenizer.json, which instances offer the same one, the stored size of its files and what loading it said.
    A few rows per model: the per-row queries of "offered by" and "size" stay small."""

    list_display = ("model", "tokenizer_digest", "source", "offered_by", "size", "stored", "load_error", "offered")
    list_filter = ("model",)
    search_fields = ("model", "instance__instance_id")
    ordering = ("model", "-offered_at")
    readonly_fields = ("instance", "model", "files_json", "offered_at", "load_error")
    exclude = ("files",)

    @admin.display(description="tokenizer.json")
    def tokenizer_digest(self, obj):
        digest = (obj.files or {}).get(TOKENIZER_JSON)
        return digest[:16] + "…" if digest else MISSING

    @admin.display(description="source")
    def source(self, obj):
        return "agent"

    @admin.display(description="offered by")
    def offered_by(self, obj):
        same = TokenizerOffer.objects.filter(model=obj.model).values_list("instance_id", "files")
        return ", ".join(sorted(instance for instance, files in same if files == obj.files))

    def _stored(self, obj):
        return TokenizerFile.objects.filter(sha256__in=set((obj.files or {}).values())).values_list("size", flat=True)

    @admin.display(description="size")
    def size(self, obj):
        sizes = list(self._stored(obj))
        return f"{sum(sizes):,} bytes" if sizes else MISSING

    @admin.display(description="files stored")
    def stored(self, obj):
        return f"{len(self._stored(obj))} of {len(set((obj.files or {}).values()))}"

    @admin.display(description="offered", ordering="offered_at")
    def offered(self, obj):
        return ago(obj.offered_at)

    @admin.display(description="files")
    def files_json(self, obj):
        return pretty_json(obj.files)

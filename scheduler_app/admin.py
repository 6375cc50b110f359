from django.contrib import admin

from controlplane import clock
from controlplane.admin_utils import MISSING, ReadOnlyAdminMixin, StatusChangeAdmin, ago, pct, pretty_json
from controlplane.liveness import status_at
from scheduler_app import fleet
from scheduler_app.models import PoolResourceSample, Proxy, ProxyStatusChange
from scheduler_app.summary import summary_columns

ADMISSION_STATES = ("accepting", "degraded", "rejecting")


def ratio_pct(value):
    return MISSING if value is None else pct(value * 100)


def count(value):
    return MISSING if value is None else str(value)


class AdmissionFilter(admin.SimpleListFilter):
    """Filter on the admission state inside the stored summary (a JSON key)."""

    title = "pool admission"
    parameter_name = "admission"

    def lookups(self, request, model_admin):
        return [(state, state) for state in ADMISSION_STATES] + [("none", "no summary")]

    def queryset(self, request, queryset):
        if self.value() == "none":
            return queryset.filter(pool_resource__isnull=True)
        if self.value() in ADMISSION_STATES:
            return queryset.filter(pool_resource__pool_admission_state=self.value())
        return queryset


@admin.register(Proxy)
class ProxyAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "proxy_id", "address", "live_status", "last_seen", "admission", "instances", "cpu", "gpu", "weight",
    )
    list_filter = ("status", AdmissionFilter)
    search_fields = ("proxy_id", "host")
    # Proxies register themselves: the admin shows them and can delete a dead one.
    readonly_fields = ("endpoints_json", "tags_json", "meta_json", "pool_resource_json")
    exclude = ("endpoints", "tags", "meta", "pool_resource")

    # Deleting goes through the manager so the history records it.
    def delete_model(self, request, obj):
        Proxy.objects.unregister(obj.pk, clock.now())

    def delete_queryset(self, request, queryset):
        now = clock.now()
        for proxy_id in queryset.values_list("pk", flat=True):
            Proxy.objects.unregister(proxy_id, now)

    @admin.display(description="address")
    def address(self, obj):
        return f"{obj.host}:{obj.port}"

    @admin.display(description="status (now)")
    def live_status(self, obj):
        return status_at(obj.last_seen_at, clock.now(), fleet.ttl_s(), fleet.heartbeat_interval_s()).value

    @admin.display(description="last seen", ordering="last_seen_at")
    def last_seen(self, obj):
        return ago(obj.last_seen_at)

    @admin.display(description="admission")
    def admission(self, obj):
        return summary_columns(obj.pool_resource)["pool_admission_state"] or MISSING

    @admin.display(description="instances alive/total")
    def instances(self, obj):
        columns = summary_columns(obj.pool_resource)
        return f"{count(columns['instances_alive'])}/{count(columns['instances_total'])}"

    @admin.display(description="CPU avg")
    def cpu(self, obj):
        return pct(summary_columns(obj.pool_resource)["cpu_avg"])

    @admin.display(description="GPU util avg")
    def gpu(self, obj):
        return pct(summary_columns(obj.pool_resource)["gpu_util_avg"])

    @admin.display(description="endpoints")
    def endpoints_json(self, obj):
        return pretty_json(obj.endpoints)

    @admin.display(description="tags")
    def tags_json(self, obj):
        return pretty_json(obj.tags)

    @admin.display(description="meta")
    def meta_json(self, obj):
        return pretty_json(obj.meta)

    @admin.display(description="latest pool summary")
    def pool_resource_json(self, obj):
        return pretty_json(obj.pool_resource)


@admin.register(PoolResourceSample)
class PoolResourceSampleAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "proxy_id", "received", "pool_admission_state", "instances", "cpu", "gpu", "memory_used",
    )
    list_filter = ("pool_admission_state",)
    search_fields = ("proxy_id",)
    exclude = ("pool_resource",)
    readonly_fields = ("summary_json",)

    @admin.display(description="received", ordering="received_at")
    def received(self, obj):
        return ago(obj.received_at)

    @admin.display(description="instances alive/total")
    def instances(self, obj):
        return f"{count(obj.instances_alive)}/{count(obj.instances_total)}"

    @admin.display(description="CPU avg", ordering="cpu_avg")
    def cpu(self, obj):
        return pct(obj.cpu_avg)

    @admin.display(description="GPU util avg", ordering="gpu_util_avg")
    def gpu(self, obj):
        return pct(obj.gpu_util_avg)

    @admin.display(description="memory used", ordering="memory_used_ratio")
    def memory_used(self, obj):
        return ratio_pct(obj.memory_used_ratio)

    @admin.display(description="pool summary")
    def summary_json(self, obj):
        return pretty_json(obj.pool_resource)


@admin.register(ProxyStatusChange)
class ProxyStatusChangeAdmin(StatusChangeAdmin):
    entry_field = "proxy_id"

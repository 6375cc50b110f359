from django.contrib import admin

from controlplane.admin_utils import (
    MISSING,
    ReadOnlyAdminMixin,
    RegisteredEndpointAdmin,
    StatusChangeAdmin,
    ago,
    date_and_age,
    pct,
    pretty_json,
)
from controlplane.admission import Admission
from scheduler_app.models import PoolResourceSample, Proxy, ProxyStatusChange
from scheduler_app.summary import summary_columns


def ratio_pct(value):
    return MISSING if value is None else pct(value * 100)


def count(value):
    return MISSING if value is None else str(value)


class AdmissionFilter(admin.SimpleListFilter):
    """Filter on the admission state inside the stored summary (a JSON key)."""

    title = "pool admission"
    parameter_name = "admission"

    def lookups(self, request, model_admin):
        return [*Admission.choices, ("none", "no summary")]

    def queryset(self, request, queryset):
        if self.value() == "none":
            return queryset.filter(pool_resource__isnull=True)
        if self.value() in Admission.values:
            return queryset.filter(pool_resource__pool_admission_state=self.value())
        return queryset


@admin.register(Proxy)
class ProxyAdmin(RegisteredEndpointAdmin):
    """Proxies register themselves: the admin shows them and can delete (unregister) a dead one."""

    list_display = (
        "proxy_id", "address", "live_status", "last_seen", "admission", "instances", "cpu", "gpu", "weight",
    )
    list_filter = ("status", AdmissionFilter)
    extra_fields = ("capacity", "summary_received", "pool_resource_json")

    @admin.display(description="capacity")
    def capacity(self, obj):
        return pretty_json({
            "max_capacity": obj.max_capacity,
            "instance_count": obj.instance_count,
            "kv_mem_per_instance_gb": obj.kv_mem_per_instance_gb,
            "kv_cache_pool_gb": obj.kv_cache_pool_gb,
            "kv_cache_update_policy": obj.kv_cache_update_policy,
        })

    @admin.display(description="latest summary received")
    def summary_received(self, obj):
        return date_and_age(obj.pool_resource_reported_at)

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
    exclude = ("pool_resource", "received_at")
    readonly_fields = ("received_detail", "summary_json")

    @admin.display(description="received", ordering="received_at")
    def received(self, obj):
        return ago(obj.received_at)

    @admin.display(description="received")
    def received_detail(self, obj):
        return date_and_age(obj.received_at)

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

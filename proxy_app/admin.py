from django.contrib import admin

from controlplane import clock
from controlplane.admin_utils import MISSING, ReadOnlyAdminMixin, StatusChangeAdmin, ago, pct, pretty_json
from controlplane.liveness import status_at
from proxy_app import pool
from proxy_app.models import Instance, InstanceResource, InstanceStatusChange


def _resource(instance):
    try:
        return instance.resource
    except InstanceResource.DoesNotExist:
        return None


@admin.register(Instance)
class InstanceAdmin(admin.ModelAdmin):
    list_display = ("instance_id", "address", "live_status", "last_seen", "cpu", "gpu", "admission", "weight")
    list_filter = ("status", "resource__admission_state")
    search_fields = ("instance_id", "host")
    list_select_related = ("resource",)
    readonly_fields = ("registered_at", "last_seen_at", "meta_json", "capabilities_json", "raw_snapshot")
    exclude = ("meta", "capabilities")

    @admin.display(description="address")
    def address(self, obj):
        return f"{obj.host}:{obj.port}"

    @admin.display(description="status (now)")
    def live_status(self, obj):
        return status_at(obj.last_seen_at, clock.now(), pool.ttl_s(), pool.heartbeat_interval_s()).value

    @admin.display(description="last seen", ordering="last_seen_at")
    def last_seen(self, obj):
        return ago(obj.last_seen_at)

    @admin.display(description="CPU", ordering="resource__cpu_util")
    def cpu(self, obj):
        resource = _resource(obj)
        return pct(resource.cpu_util) if resource else MISSING

    @admin.display(description="GPU util", ordering="resource__gpu_util_avg")
    def gpu(self, obj):
        resource = _resource(obj)
        return pct(resource.gpu_util_avg) if resource else MISSING

    @admin.display(description="admission", ordering="resource__admission_state")
    def admission(self, obj):
        resource = _resource(obj)
        return (resource.admission_state or MISSING) if resource else MISSING

    @admin.display(description="meta")
    def meta_json(self, obj):
        return pretty_json(obj.meta)

    @admin.display(description="capabilities")
    def capabilities_json(self, obj):
        return pretty_json(obj.capabilities)

    @admin.display(description="latest snapshot")
    def raw_snapshot(self, obj):
        resource = _resource(obj)
        return pretty_json(resource.raw_resource) if resource else MISSING


@admin.register(InstanceResource)
class InstanceResourceAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "instance", "reported", "cpu_util", "memory_free_ratio", "gpu_count", "gpu_util_avg",
        "gpu_util_max", "admission_state", "report_seq",
    )
    list_filter = ("admission_state", "gpu_sample_quality")
    search_fields = ("instance__instance_id", "instance__host")
    exclude = ("raw_resource",)
    readonly_fields = ("raw_json",)

    @admin.display(description="reported", ordering="resource_reported_at")
    def reported(self, obj):
        return ago(obj.resource_reported_at)

    @admin.display(description="raw snapshot")
    def raw_json(self, obj):
        return pretty_json(obj.raw_resource)


@admin.register(InstanceStatusChange)
class InstanceStatusChangeAdmin(StatusChangeAdmin):
    entry_field = "instance_id"

from django.contrib import admin
from django.urls import NoReverseMatch, reverse

from controlplane.clock import date_and_age
from controlplane.endpoints.admin import RegisteredEndpointAdmin, StatusChangeAdmin, pretty_json
from controlplane.endpoints.admission import Admission
from controlplane.figures import MISSING, percent_text
from controlplane.series.admin import MinuteRollupAdmin, SeriesPointAdmin
from controlplane.series.pool_summary import summary_columns
from scheduler_app.models import PoolResourceSample, Proxy, ProxyPoolMinute, ProxyStatusChange


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

    def view_on_site(self, obj):
        """The change page's "View on site" button opens the proxy's dashboard page."""
        try:
            return reverse("fleet-proxy", args=[obj.pk])
        except NoReverseMatch:  # this process does not serve the scheduler role's pages
            return None

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
        return f"{count(columns['alive'])}/{count(columns['total'])}"

    @admin.display(description="CPU avg")
    def cpu(self, obj):
        return percent_text(summary_columns(obj.pool_resource)["cpu_avg"])

    @admin.display(description="GPU util avg")
    def gpu(self, obj):
        return percent_text(summary_columns(obj.pool_resource)["gpu_util_avg"])

    @admin.display(description="latest pool summary")
    def pool_resource_json(self, obj):
        return pretty_json(obj.pool_resource)


@admin.register(PoolResourceSample)
class PoolResourceSampleAdmin(SeriesPointAdmin):
    extra_fields = ("summary_json",)

    @admin.display(description="pool summary")
    def summary_json(self, obj):
        return pretty_json(obj.summary)


@admin.register(ProxyPoolMinute)
class ProxyPoolMinuteAdmin(MinuteRollupAdmin):
    pass


@admin.register(ProxyStatusChange)
class ProxyStatusChangeAdmin(StatusChangeAdmin):
    entry_field = "proxy_id"

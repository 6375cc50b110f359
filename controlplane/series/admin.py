"""The admin of every series (SPEC 9): full-resolution points and minute rollups, read-only."""

from django.contrib import admin

from controlplane import clock
from controlplane.clock import date_and_age
from controlplane.endpoints.admin import ReadOnlyAdminMixin


class RecentFilter(admin.SimpleListFilter):
    """Full-resolution series hold minutes, not days: filter them by age instead of a date hierarchy."""

    title = "age"
    parameter_name = "within"
    WINDOWS = (("60", "last minute"), ("300", "last 5 minutes"), ("900", "last 15 minutes"))

    def lookups(self, request, model_admin):
        return self.WINDOWS

    def queryset(self, request, queryset):
        if self.value() in dict(self.WINDOWS):
            return queryset.filter(t__gte=clock.now() - int(self.value()))
        return queryset


class SeriesPointAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Full-resolution series rows: read-only, newest first, ``t`` shown as a date and an age."""

    list_filter = (RecentFilter,)

    def get_list_display(self, request):
        return (*self.key_columns(), "when", *self.model.FIGURES, self.model.ADMISSION)

    def key_columns(self):
        return tuple(f.name for f in self.model._meta.fields if f.name.endswith("_id"))

    def get_search_fields(self, request):
        return self.key_columns()

    def get_fields(self, request, obj=None):
        return (*self.key_columns(), "when", *self.model.FIGURES, self.model.ADMISSION, *self.extra_fields)

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj)

    extra_fields = ()

    @admin.display(description="at", ordering="t")
    def when(self, obj):
        return date_and_age(obj.t)


class MinuteRollupAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Minute rollups: read-only, browsed by date."""

    date_hierarchy = "minute"

    def get_list_display(self, request):
        keys = tuple(f.name for f in self.model._meta.fields if f.name.endswith("_id"))
        return (*keys, "minute", "samples", *(f"{name}_avg" for name in self.model.FIGURES), self.model.ADMISSION)

    def get_search_fields(self, request):
        return tuple(f.name for f in self.model._meta.fields if f.name.endswith("_id"))

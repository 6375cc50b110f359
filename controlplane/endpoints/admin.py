"""What both control planes' admin pages share: read-only rows and JSON, the status-change
history, and one admin for everything that registers and heartbeats."""

import json

from django.contrib import admin
from django.utils.html import format_html

from controlplane import clock


def pretty_json(value):
    """Read-only, indented JSON for a detail page."""
    return format_html("<pre style='white-space: pre-wrap'>{}</pre>", json.dumps(value, indent=2, sort_keys=True))


class ReadOnlyAdminMixin:
    """Rows written by the system only: shown, never added or edited by hand."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class StatusChangeAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The status-change history of instances or proxies; ``entry_field`` names the id column."""

    entry_field = ""
    list_filter = ("new_status", "reason")

    def get_list_display(self, request):
        return (self.entry_field, "old_status", "new_status", "reason", "when")

    def get_search_fields(self, request):
        return (self.entry_field,)

    def get_fields(self, request, obj=None):
        return (self.entry_field, "old_status", "new_status", "reason", "when")

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj)

    @admin.display(description="at", ordering="at")
    def when(self, obj):
        return clock.date_and_age(obj.at)


class RegisteredEndpointAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """An instance or a proxy: registered by itself, so shown read-only.

    Liveness is computed now from ``last_seen_at``, times are dates and ages,
    and deleting goes through the manager's ``unregister``, so the status
    history records it as the API would (SPEC 4).
    """

    list_filter = ("status",)
    # The detail page: the entry's own columns first, then what differs per app.
    common_fields = ("address", "live_status", "registered", "last_seen_detail", "weight",
                     "endpoints_json", "tags_json", "meta_json", "load")
    extra_fields = ()

    def get_search_fields(self, request):
        return (self.model._meta.pk.name, "host")

    def get_fields(self, request, obj=None):
        return (self.model._meta.pk.name, *self.common_fields, *self.extra_fields)

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj)

    def delete_model(self, request, obj):
        self.model.objects.unregister(obj.pk, clock.now())

    def delete_queryset(self, request, queryset):
        now = clock.now()
        for pk in queryset.values_list("pk", flat=True):
            self.model.objects.unregister(pk, now)

    @admin.display(description="address")
    def address(self, obj):
        return obj.address

    @admin.display(description="status (now)")
    def live_status(self, obj):
        return obj.status_now(clock.now()).value

    @admin.display(description="last seen", ordering="last_seen_at")
    def last_seen(self, obj):
        return clock.ago(obj.last_seen_at)

    @admin.display(description="last seen")
    def last_seen_detail(self, obj):
        return clock.date_and_age(obj.last_seen_at)

    @admin.display(description="registered")
    def registered(self, obj):
        return clock.date_and_age(obj.registered_at)

    @admin.display(description="load")
    def load(self, obj):
        return pretty_json({name: getattr(obj, name) for name in self.model.LOAD_FIELDS})

    @admin.display(description="endpoints")
    def endpoints_json(self, obj):
        return pretty_json(obj.endpoints)

    @admin.display(description="tags")
    def tags_json(self, obj):
        return pretty_json(obj.tags)

    @admin.display(description="meta")
    def meta_json(self, obj):
        return pretty_json(obj.meta)

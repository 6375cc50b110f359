"""Small helpers shared by both control planes' admin pages."""

import json

from django.contrib import admin
from django.utils.html import format_html

from controlplane import clock

MISSING = "–"


def ago(timestamp, now=None):
    """'12 s ago' for an epoch-seconds timestamp; '–' when unknown."""
    if timestamp is None:
        return MISSING
    age = max(0.0, (clock.now() if now is None else now) - timestamp)
    if age < 120:
        return f"{age:.0f} s ago"
    if age < 7200:
        return f"{age / 60:.0f} min ago"
    return f"{age / 3600:.1f} h ago"


def pct(value):
    return MISSING if value is None else f"{value:.1f} %"


def pretty_json(value):
    """Read-only, indented JSON for a detail page."""
    return format_html("<pre style='white-space: pre-wrap'>{}</pre>", json.dumps(value, indent=2, sort_keys=True))


class ReadOnlyAdminMixin:
    """History rows are written by the system only."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class StatusChangeAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The status-change history of instances or proxies; ``entry_field`` names the id column."""

    entry_field = ""
    list_filter = ("new_status",)

    def get_list_display(self, request):
        return (self.entry_field, "old_status", "new_status", "reason", "when")

    def get_search_fields(self, request):
        return (self.entry_field,)

    @admin.display(description="at", ordering="at")
    def when(self, obj):
        return ago(obj.at)

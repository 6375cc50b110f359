"""Answers both roles share: ``{"ok": true}``, list rows and pages, history points (SPEC 3, 6, 9)."""

from drf_spectacular.utils import PolymorphicProxySerializer
from rest_framework import serializers

from controlplane.api.rows import alive_field, reads, status_field
from controlplane.api.schema.parts import Const
from controlplane.endpoints.liveness import Status
from controlplane.series.history import RANGES


class OkBody(serializers.Serializer):
    """Done."""

    ok = Const(True)


def page_of(row, name):
    """A list answer: the bare array (no paging parameter) or a page object (``limit``/``offset``)."""
    page = type(f"{name}Page", (serializers.Serializer,), {
        "__doc__": "One page of the list, with the total, so a client can tell how far to go.",
        "count": serializers.IntegerField(help_text="Rows in the whole list."),
        "limit": serializers.IntegerField(allow_null=True, help_text="As asked; null when only `offset` was."),
        "offset": serializers.IntegerField(),
        "results": row(many=True),
    })
    return PolymorphicProxySerializer(
        component_name=f"{name}List", serializers=[row(many=True), page], resource_type_field_name=None, many=False,
    )


class RegisteredEntryRow(serializers.Serializer):
    """The columns every list row of a registered instance or proxy has (SPEC 3, 6), after its id."""

    host = serializers.CharField()
    port = serializers.IntegerField(min_value=1, max_value=65535)
    endpoints = serializers.ListField(child=serializers.CharField())
    tags = serializers.ListField(child=serializers.CharField())
    weight = serializers.FloatField(min_value=0)
    meta = serializers.DictField()
    registered_at = serializers.FloatField(help_text="Epoch seconds (the first registration).")
    last_seen_at = serializers.FloatField(help_text="Epoch seconds, server receive time of the last contact.")
    status = status_field(serializers.ChoiceField(choices=Status.choices, help_text="SPEC 4, from the TTL at read time."))
    is_alive = alive_field(serializers.BooleanField(help_text="now − last_seen_at ≤ ttl_s; never null."))


def nullable_number(help_text=""):
    return serializers.FloatField(allow_null=True, help_text=help_text)


def nullable_integer(help_text=""):
    return serializers.IntegerField(allow_null=True, help_text=help_text)


def nullable_text(help_text=""):
    return serializers.CharField(allow_null=True, help_text=help_text)


class FigureRange(serializers.DictField):
    """The lowest or highest value of each figure over a point's minutes."""

    def __init__(self, **kwargs):
        super().__init__(child=serializers.FloatField(allow_null=True), **kwargs)


def history_point(name, figures, admission):
    """A history point (SPEC 9): ``t``, each figure (null where the input was), the admission state,
    and over minutes the ``min`` and ``max`` of each figure."""
    fields = {
        "__doc__": "One point of a series, oldest first. A figure is null where its input was null.",
        "t": serializers.FloatField(help_text="Epoch seconds: the sample, or the start of the point's minutes."),
        **{figure: nullable_number() for figure in figures},
        admission: nullable_text("The worst admission state of the point."),
        "min": FigureRange(required=False, help_text="Minute resolution only: the lowest value of each figure."),
        "max": FigureRange(required=False, help_text="Minute resolution only: the highest value of each figure."),
    }
    return type(name, (serializers.Serializer,), fields)


def history_answer(name, key, point_name, point_model):
    """A history answer (SPEC 9): the entry's id under ``key``, the range, and points of ``point_model``'s figures;
    ``ControlPlaneViewSet.series_response`` builds it (``RowShape.answer_builder``), the points as read."""
    point = history_point(point_name, point_model.FIGURES, point_model.ADMISSION)
    return type(name, (serializers.Serializer,), {
        "__doc__": "A series over a range (SPEC 9).",
        key: serializers.CharField(),
        "range": serializers.ChoiceField(choices=list(RANGES)),
        "resolution_s": serializers.FloatField(help_text=(
            "Seconds between points as they lie: at full resolution the median gap between consecutive "
            "points (the recorder's tick for the Proxy's series, a proxy's heartbeat interval for the "
            "Scheduler's copy; the configured tick when there are fewer than two points); in minutes, "
            "the width of a point's bucket (60, or a multiple on wider ranges).")),
        "points": reads(point(many=True), "points"),
    })


class Check(serializers.Serializer):
    ok = serializers.BooleanField()
    error = serializers.CharField(required=False, help_text="Why it failed, where it could not be read.")


class Ready(serializers.Serializer):
    ok = serializers.BooleanField(help_text="Every check passed (the answer is then 200, else 503).")
    roles = serializers.ListField(child=serializers.CharField(), help_text="FLEETWATCH_ROLES: `proxy`, `scheduler`.")
    checks = serializers.DictField(child=Check(), help_text=(
        "Each check by name, with its detail: `database` (`vendor`), `migrations` (`unapplied`: the "
        "migrations not yet applied), and on a Proxy `recorder` (`last_record_age_s`) and `link` "
        "(`last_attempt_age_s`, `registered`, `consecutive_failures`, `last_error`). Without a database "
        "only `database` is there."))
    failed = serializers.ListField(child=serializers.CharField(), help_text="The names of the checks not ok.")


class Health(serializers.Serializer):
    ok = Const(True)
    ttl_s = serializers.IntegerField(help_text="The instance TTL where this process is a Proxy, else the proxy TTL.")
    roles = serializers.ListField(child=serializers.CharField(), help_text="FLEETWATCH_ROLES: `proxy`, `scheduler`.")

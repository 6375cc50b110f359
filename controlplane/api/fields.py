"""Strict request fields shared by both control planes' serializers.

DRF's own fields coerce (``123`` becomes ``"123"``, ``true`` becomes ``1``);
an API whose null means "unknown" and whose 0 means "measured zero" must not.
"""

import math

from rest_framework import serializers

from controlplane.figures import MAX_DB_INT, MAX_QUANTITY

# In-flight requests of one instance or proxy; summed over a pool, so bounded
# well below what a 64-bit sum could overflow at.
MAX_INFLIGHT = 2**31 - 1


class StrictCharField(serializers.CharField):
    """A string, and only a string (DRF would turn 123 into "123")."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """An integer; booleans and fractional numbers are refused."""

    def __init__(self, **kwargs):
        kwargs.setdefault("max_value", MAX_DB_INT)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if isinstance(data, bool) or (isinstance(data, float) and not data.is_integer()):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    """A finite number (numeric strings accepted, as the original's pydantic did).

    At most ``MAX_QUANTITY`` unless told otherwise: no weight, rate or size in
    this API comes near it, and sums and products of accepted values must stay
    finite, or they could not be stored or sent back as JSON.
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("max_value", MAX_QUANTITY)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if isinstance(data, bool):
            self.fail("invalid")
        value = super().to_internal_value(data)
        if not math.isfinite(value):
            self.fail("invalid")
        return value


class StrictListOfStrings(serializers.ListField):
    def __init__(self, **kwargs):
        kwargs.setdefault("child", StrictCharField(max_length=1024, allow_blank=True))
        kwargs.setdefault("max_length", 256)
        super().__init__(**kwargs)


class JSONObjectField(serializers.JSONField):
    """A JSON object (dict); lists and scalars are refused."""

    default_error_messages = {"not_object": "Expected a JSON object."}

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            self.fail("not_object")
        return data


class NullAsDefaultMixin:
    """Treat an explicit null like an absent field (old clients send nulls)."""

    def validate_empty_values(self, data):
        if data is None and self.default is not serializers.empty:
            return True, self.get_default()
        return super().validate_empty_values(data)


class ListOrNull(NullAsDefaultMixin, StrictListOfStrings):
    pass


class ObjectOrNull(NullAsDefaultMixin, JSONObjectField):
    pass

"""Strict request fields shared by both control planes' serializers.

DRF's own fields coerce (``123`` becomes ``"123"``, ``true`` becomes ``1``);
an API whose null means "unknown" and whose 0 means "measured zero" must not.
"""

import functools
import math

from rest_framework import serializers

from controlplane.api.parsers import SURROGATE
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


# --- the same fields as plain functions, for the bodies the hot path checks by hand -------------
#
# Each answers what its field's ``run_validation`` answers for a value that is
# present and not null (the caller reads absent and null as the field's
# ``required`` and ``allow_null`` say). A value of the right type within range
# is answered at once; any other goes to the field itself, built once per
# bounds, so its messages and its reading of ``"3"`` or ``3.0`` stay the
# field's own: there is one rule, and a fast way through it.


@functools.lru_cache(maxsize=64)
def _field(kind, **bounds):
    return kind(**bounds)


def check_integer(value, minimum, maximum):
    """``StrictIntegerField(min_value=minimum, max_value=maximum)``."""
    if type(value) is int and minimum <= value <= maximum:
        return value
    return _field(StrictIntegerField, min_value=minimum, max_value=maximum).run_validation(value)


def check_number(value, minimum, maximum=MAX_QUANTITY):
    """``StrictFloatField(min_value=minimum, max_value=maximum)``: a float, numeric strings accepted."""
    if (type(value) is float or type(value) is int) and minimum <= value <= maximum:
        return float(value)
    return _field(StrictFloatField, min_value=minimum, max_value=maximum).run_validation(value)


def check_text(value, max_length):
    """``StrictCharField(max_length=max_length)`` (not blank): the string, trimmed."""
    if isinstance(value, str):
        text = value.strip()
        if text and len(text) <= max_length and "\x00" not in text and not SURROGATE.search(text):
            return text
    return _field(StrictCharField, max_length=max_length).run_validation(value)

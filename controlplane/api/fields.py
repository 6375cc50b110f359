"""Strict request fields shared by both control planes' serializers.

DRF's own fields coerce (``123`` becomes ``"123"``, ``true`` becomes ``1``);
an API whose null means "unknown" and whose 0 means "measured zero" must not.
"""

import math
import re

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


# --- the same fields as plain functions, for the bodies the hot path checks by hand -------------
#
# Each answers what its field's ``run_validation`` answers for a value that is
# present and not null (the caller reads absent and null as the field's
# ``required`` and ``allow_null`` say), or raises a ``ValidationError`` with the
# field's messages: its own checks, then every validator's, in the field's
# order. A value of the right type within range is answered at once; any
# other goes through the field's own steps (``"3"``, ``3.0`` and ``" 3 "``
# are integers to DRF), so it is read as the field reads it.

# DRF's IntegerField and FloatField: longer strings are refused unread; "1.0" is an integer, "1.2" is not.
MAX_NUMBER_STRING = 1000
DECIMAL_TAIL = re.compile(r"\.0*\s*$")
# What CharField's ProhibitSurrogateCharactersValidator refuses.
SURROGATE = re.compile("[\ud800-\udfff]")


def _within(value, minimum, maximum):
    """The ``MaxValueValidator`` then ``MinValueValidator`` of an integer or float field."""
    messages = []
    if value > maximum:
        messages.append(f"Ensure this value is less than or equal to {maximum}.")
    if value < minimum:
        messages.append(f"Ensure this value is greater than or equal to {minimum}.")
    if messages:
        raise serializers.ValidationError(messages)
    return value


def check_integer(value, minimum, maximum):
    """``StrictIntegerField(min_value=minimum, max_value=maximum)``."""
    if type(value) is int and minimum <= value <= maximum:
        return value
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise serializers.ValidationError(["A valid integer is required."])
    if isinstance(value, str) and len(value) > MAX_NUMBER_STRING:
        raise serializers.ValidationError(["String value too large."])
    try:
        value = int(DECIMAL_TAIL.sub("", str(value)))  # str() of an int past 4,300 digits is a ValueError too
    except (ValueError, TypeError):
        raise serializers.ValidationError(["A valid integer is required."]) from None
    return _within(value, minimum, maximum)


def check_number(value, minimum, maximum=MAX_QUANTITY):
    """``StrictFloatField(min_value=minimum, max_value=maximum)``: a float, numeric strings accepted."""
    if (type(value) is float or type(value) is int) and minimum <= value <= maximum:
        return float(value)
    if isinstance(value, bool):
        raise serializers.ValidationError(["A valid number is required."])
    if isinstance(value, str) and len(value) > MAX_NUMBER_STRING:
        raise serializers.ValidationError(["String value too large."])
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise serializers.ValidationError(["A valid number is required."]) from None
    except OverflowError:
        raise serializers.ValidationError(["Integer value too large to convert to float"]) from None
    if not math.isfinite(number):
        raise serializers.ValidationError(["A valid number is required."])
    return _within(number, minimum, maximum)


def check_text(value, max_length):
    """``StrictCharField(max_length=max_length)`` (not blank): the string, trimmed."""
    if not isinstance(value, str):
        raise serializers.ValidationError(["Not a valid string."])
    text = value.strip()
    if not text:
        raise serializers.ValidationError(["This field may not be blank."])
    if len(text) <= max_length and "\x00" not in text and SURROGATE.search(text) is None:
        return text
    messages = []
    if len(text) > max_length:
        messages.append(f"Ensure this field has no more than {max_length} characters.")
    if "\x00" in text:
        messages.append("Null characters are not allowed.")
    surrogate = SURROGATE.search(text)
    if surrogate:
        messages.append(f"Surrogate characters are not allowed: U+{ord(surrogate.group()):X}.")
    raise serializers.ValidationError(messages)

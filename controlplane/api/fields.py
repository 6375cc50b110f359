"""Strict request fields shared by both control planes' serializers.

DRF's own fields coerce (``123`` becomes ``"123"``, ``true`` becomes ``1``);
an API whose null means "unknown" and whose 0 means "measured zero" must not.
"""

import math

from rest_framework import serializers
from rest_framework.fields import SkipField, empty
from rest_framework.settings import api_settings

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

    def check(self, value):
        """``run_validation`` of a present, non-null value; a plainly valid one is answered at once (``BodyChecks``)."""
        if isinstance(value, str) and self.trim_whitespace and not self.min_length:
            text = value.strip()
            if (text and (self.max_length is None or len(text) <= self.max_length) and "\x00" not in text
                    and not SURROGATE.search(text)):
                return text
        return self.run_validation(value)


class StrictIntegerField(serializers.IntegerField):
    """An integer; booleans and fractional numbers are refused."""

    def __init__(self, **kwargs):
        kwargs.setdefault("max_value", MAX_DB_INT)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if isinstance(data, bool) or (isinstance(data, float) and not data.is_integer()):
            self.fail("invalid")
        return super().to_internal_value(data)

    def check(self, value):
        """``run_validation`` of a present, non-null value; a plainly valid one is answered at once (``BodyChecks``)."""
        if (type(value) is int and (self.min_value is None or self.min_value <= value)
                and (self.max_value is None or value <= self.max_value)):
            return value
        return self.run_validation(value)


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

    def check(self, value):
        """``run_validation`` of a present, non-null value; a plainly valid one is answered at once (``BodyChecks``)."""
        if ((type(value) is int or (type(value) is float and math.isfinite(value)))
                and (self.min_value is None or self.min_value <= value)
                and (self.max_value is None or value <= self.max_value)):
            return float(value)
        return self.run_validation(value)


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

    def check(self, value):
        return value if isinstance(value, dict) else self.run_validation(value)


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


class StrictBooleanField(serializers.BooleanField):
    """``true`` or ``false``, nothing else (DRF would read ``"yes"`` or ``1`` as true)."""

    def to_internal_value(self, data):
        if type(data) is not bool:
            self.fail("invalid", input=data)
        return data

    check = to_internal_value


class BodyChecks:
    """A declared serializer's rules as one plain loop: for the bodies the hot lane checks on every report.

    Built once from the serializer that the schema publishes: each declared
    field in its order, with its own ``check`` (a plainly valid value answered
    at once, any other through the field's ``run_validation``) and its own
    reading of an absent or null value (``validate_empty_values``: required,
    null, default). So there is one rule per field, one set of messages and one
    order of errors, as DRF's ``is_valid`` gives them, without building a
    serializer per request (DRF deep-copies its declared fields every time,
    which cost more than the whole snapshot normalisation).
    """

    def __init__(self, serializer_class, null_is_invalid=False):
        """``null_is_invalid``: a null body is refused as any other non-object is, in the words of the serializer's
        ``to_internal_value`` ("Invalid data. Expected a dictionary, but got NoneType."), not of ``is_valid``
        ("No data provided"): the placement views' words since they called ``to_internal_value``."""
        serializer = serializer_class()
        self.null_is_invalid = null_is_invalid
        self.fields = tuple((name, field, getattr(field, "check", field.run_validation))
                            for name, field in serializer.fields.items() if not field.read_only)
        self.invalid = serializer.error_messages["invalid"]
        self.validate = serializer.validate

    def __call__(self, data):
        """The validated data of ``data``, else the ``ValidationError`` its serializer raises."""
        if not isinstance(data, dict):
            # DRF's own words: "No data provided" is what ``Serializer.errors`` says of a null body.
            message = "No data provided" if data is None and not self.null_is_invalid \
                else self.invalid.format(datatype=type(data).__name__)
            raise serializers.ValidationError({api_settings.NON_FIELD_ERRORS_KEY: [message]})
        valid, errors = {}, {}
        for name, field, check in self.fields:
            value = data.get(name, empty)
            try:
                if value is empty or value is None:
                    valid[name] = field.validate_empty_values(value)[1]
                else:
                    valid[name] = check(value)
            except serializers.ValidationError as error:
                errors[name] = error.detail
            except SkipField:
                pass
        if errors:
            raise serializers.ValidationError(errors)
        return self.validate(valid)

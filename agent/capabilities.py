"""An instance's typed capabilities and their fingerprint (SPEC 3.2): pure functions.

Both sides of the wire compute them alike: an instance (the simulated ones,
the original's) sends its capabilities and their fingerprint, the Proxy
validates, stores and compares them. Kept on the host side, beside the
agent, so a client needs nothing of the control plane to compute them.

The original CacheRoute Instance registers an ``InstanceCapability`` object
(model, tokenizer, adapters, KV-cache layout, parallelism, runtime) and then
heartbeats only its fingerprint; a Proxy that holds other capabilities (or
none, after a restart) tells it so and the Instance sends them again. That
only works if both sides compute the same fingerprint for the same object,
so the canonical form here is the original's, member for member:

- ``parse_capabilities`` checks the typed object (unknown keys anywhere in
  it are an error; the free-form ``configuration`` and ``layout_parameters``
  objects are kept as sent) and returns its canonical form. Every typed
  sub-object and list is present, absent ones as their defaults (``{}``,
  ``[]``, ``layout_parameters: {}``, ``schema_version: "1"``); optional
  scalars that are null are dropped; empty objects and lists are kept;
  ``runtime.supported_cache_features`` is sorted and de-duplicated. That
  form is what is stored. (The original validates into its pydantic model
  and dumps it with ``exclude_none``: the same result.)
- A member sent as null is read as absent, so it takes its default. The
  original refuses a null for a member that is not optional; taking it is
  the kinder answer and cannot change the fingerprint of anything the
  original accepts.
- ``fingerprint`` is ``"sha256:"`` + the hex SHA-256 of the canonical form as
  JSON with sorted keys, separators ``,`` and ``:``, and non-ASCII text kept
  as UTF-8.
- ``full_view`` is what list rows show: every field present, defaults
  filled in, absent optionals as null.
"""

import hashlib
import json

MAX_TEXT = 1024
MAX_ADAPTERS = 1024
MAX_FEATURES = 256


class CapabilityError(ValueError):
    """Invalid capabilities: ``errors`` maps a dotted path to its messages."""

    def __init__(self, errors):
        super().__init__(errors)
        self.errors = errors


class _Text:
    """A string; null (dropped) unless it has a default."""

    def __init__(self, default=None):
        self.default = default

    def parse(self, value, path, errors):
        if value is None:
            return self.default
        if isinstance(value, str) and len(value) <= MAX_TEXT:
            return value
        errors[path] = ["Must be a string or null." if not isinstance(value, str)
                        else f"Must be at most {MAX_TEXT} characters."]
        return None

    def full(self, value):
        return self.default if value is None else value


class _RequiredText(_Text):
    def parse(self, value, path, errors):
        if value is None:
            errors[path] = ["This field is required."]
            return None
        return super().parse(value, path, errors)


class _PositiveInt:
    """An integer greater than 0, or null (dropped)."""

    def parse(self, value, path, errors):
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 2**31 - 1:
            errors[path] = ["Must be an integer greater than 0, or null."]
            return None
        return value

    def full(self, value):
        return value


class _Object:
    """A free-form JSON object, kept as sent (empty included); ``{}`` when absent
    if ``empty_default``, else null (dropped)."""

    def __init__(self, empty_default=False):
        self.empty_default = empty_default

    def parse(self, value, path, errors):
        if value is None:
            return {} if self.empty_default else None
        if not isinstance(value, dict):
            errors[path] = ["Must be a JSON object."]
            return None
        return value

    def full(self, value):
        return ({} if self.empty_default else None) if value is None else value


class _Features:
    """A list of strings: sorted and de-duplicated; ``[]`` when absent."""

    def parse(self, value, path, errors):
        if value is None:
            return []
        if not isinstance(value, list) or len(value) > MAX_FEATURES:
            errors[path] = [f"Must be a list of at most {MAX_FEATURES} strings."]
            return None
        bad = [i for i, item in enumerate(value) if not isinstance(item, str) or len(item) > MAX_TEXT]
        for i in bad:
            errors[f"{path}[{i}]"] = ["Must be a string."]
        return None if bad else sorted(set(value))

    def full(self, value):
        return [] if value is None else value


class _Record:
    """A typed object: known keys only, each member parsed by its own type;
    absent or null, it is the object of its defaults (never dropped)."""

    def __init__(self, **members):
        self.members = members

    def parse(self, value, path, errors):
        if value is None:
            value = {}
        if not isinstance(value, dict):
            errors[path] = ["Must be a JSON object or null."]
            return None
        for key in value.keys() - self.members.keys():
            errors[_join(path, key)] = ["Unknown field."]
        parsed = {}
        for key, member in self.members.items():
            result = member.parse(value.get(key), _join(path, key), errors)
            if result is not None:  # null optionals are dropped
                parsed[key] = result
        return parsed

    def full(self, value):
        value = value or {}
        return {key: member.full(value.get(key)) for key, member in self.members.items()}


class _List:
    """A list of one typed item; ``[]`` when absent."""

    def __init__(self, item):
        self.item = item

    def parse(self, value, path, errors):
        if value is None:
            return []
        if not isinstance(value, list) or len(value) > MAX_ADAPTERS:
            errors[path] = [f"Must be a list of at most {MAX_ADAPTERS} objects, or null."]
            return None
        items = []
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                errors[f"{path}[{i}]"] = ["Must be a JSON object."]
                continue
            items.append(self.item.parse(item, f"{path}[{i}]", errors))
        return items

    def full(self, value):
        return [self.item.full(item) for item in value or []]


def _join(path, key):
    return f"{path}.{key}" if path else key


def _identity():
    return _Record(identifier=_Text(), revision=_Text())


CAPABILITY = _Record(
    schema_version=_Text(default="1"),
    model=_identity(),
    tokenizer=_identity(),
    adapters=_List(_Record(
        identifier=_RequiredText(), revision=_Text(), configuration=_Object(), configuration_hash=_Text(),
    )),
    kv_cache=_Record(
        layout=_Text(), schema_version=_Text(), dtype=_Text(), block_size=_PositiveInt(),
        layout_parameters=_Object(empty_default=True),
    ),
    parallelism=_Record(
        tensor_parallel_size=_PositiveInt(), pipeline_parallel_size=_PositiveInt(),
        data_parallel_size=_PositiveInt(),
    ),
    runtime=_Record(vllm_version=_Text(), lmcache_version=_Text(), supported_cache_features=_Features()),
)


def parse_capabilities(value, path="capabilities"):
    """The canonical form of a capabilities object (None for None); raises ``CapabilityError``."""
    if value is None:
        return None
    errors = {}
    if not isinstance(value, dict):
        errors[path] = ["Must be a JSON object or null."]
    parsed = CAPABILITY.parse(value, path, errors) if not errors else None
    if errors:
        raise CapabilityError(dict(sorted(errors.items())))
    return parsed


def canonical_json(capabilities):
    """The bytes the fingerprint is taken over."""
    return json.dumps(capabilities, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def fingerprint(capabilities):
    """``"sha256:<hex>"`` of a canonical capabilities object; None for None."""
    if capabilities is None:
        return None
    return "sha256:" + hashlib.sha256(canonical_json(capabilities)).hexdigest()


def full_view(capabilities):
    """Every field present (defaults filled in, absent optionals null), as list rows show them; None for None."""
    return None if capabilities is None else CAPABILITY.full(capabilities)

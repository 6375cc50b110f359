"""Answer rows declared once: the serializer the schema publishes also says how its builder reads each key.

A row's serializer lists its keys in order, each with its type, nullability
and description, and drf-spectacular reads it as it is. ``reads`` tags a
declared field with where its value comes from: columns of one
``values_list`` query, passed through a function where the value is worked
out (the liveness status, the fence, a score). A key declared without
``reads`` is the column of its own name (under a nested row's ``prefix``);
a list or object key the JSON text stored in it, spliced into the answer as
an ``orjson.Fragment``, never decoded (``json_as_text=False``: the column
as Django decodes it). A ``Const`` key is its constant; a nested row read
from an explicit column (``reads(Nested(), "column")``) is that column's
value as it is (an object built elsewhere by its own shape, or null).

``RowShape`` compiles the serializer once into the query's columns and one
function that builds a batch of rows. The function is written out as source
(kept in ``RowShape.source``) and compiled, as ``dataclasses`` and
``namedtuple`` make their methods: one dict display per row, each key once,
its value read by position, a call shared by two keys made once. A loop over
(key, getter) pairs cost 40 % more per row than the hand-written builder it
replaces (some 7 % of the whole list); this costs what that builder did
(``bench/list_rows.py``, bench/README.md).

An answer that is not rows of a query (a register's answer, ``/debug/status``,
the pool summary, a placement's answer and each of its candidates) is built
by the same compilation for one answer: ``answer_builder()`` gives
``answer(**values)``, whose keyword parameters are the declaration's columns,
so a value it does not read, or one it reads and was not given, is a
``TypeError``; its keys, their order and every value worked out
(``reads(…, using=…)``) come from the declaration as a row's do. Its source
reads each column as its parameter (or an attribute path of one:
``"ranked.candidate.host"``, read as written), one dict display and no loop: a
placement builds four answers (its own and three candidates') per request,
and going through the rows' builder over a one-row batch doubled what its
hand-written dicts cost (``bench/answer_bodies.py``).
"""

import re

from django.db import models
from orjson import Fragment
from rest_framework import serializers

from controlplane.api.schema.parts import Const
from controlplane.endpoints.models import JSONTextField
from controlplane.series.queries import as_text

STATUS_OF = "status_of"  # the context's ``liveness.status_reader``: last_seen_at → (status, is_alive)


NOT_CONSTANT = object()


class Read:
    """Where a key's value comes from: ``using(*columns)``, or the one column; ``item`` of ``using``'s
    answer where one call answers several keys (made once per row); ``value``: always this one."""

    def __init__(self, columns=(), using=None, item=None, value=NOT_CONSTANT, prefix="", leads=False):
        self.columns, self.using, self.item, self.value = tuple(columns), using, item, value
        self.prefix, self.leads = prefix, leads


class Text:
    """A JSON column read as its stored text (``null``: the text read for SQL NULL)."""

    def __init__(self, column, null="null"):
        self.column, self.null = column, null

    @property
    def name(self):
        return self.column.replace("__", "_") + "_text"

    def expression(self):
        return as_text(self.column, null=self.null)


class Annotated:
    """A column the query computes (``expression``), fetched under ``name``."""

    def __init__(self, name, expression):
        self.name, self._expression = name, expression

    def expression(self):
        return self._expression


def reads(field, *columns, using=None, item=None, prefix="", leads=False):
    """``field``, declared to read ``using(*columns)`` (or the one column); a nested row's children read
    their own columns under ``prefix``. A column is a name of the query, a ``Text`` or an ``Annotated``
    (for one answer, ``answer_builder``, also an attribute path of a value given: ``"decision.reason"``).
    ``leads``: the key comes first in the answer, before the keys a row inherits (the schema lists the
    inherited ones first, as DRF orders a subclass's fields; the answers put the row's id first)."""
    field.row_read = Read(columns, using, item, prefix=prefix, leads=leads)
    return field


def always(field, value):
    """``field``, whose value is always ``value`` (a figure this deployment never has)."""
    field.row_read = Read(value=value)
    return field


def status_field(field):
    """The liveness status (SPEC 4) of the row's ``last_seen_at``."""
    return reads(field, "last_seen_at", using=STATUS_OF, item=0)


def alive_field(field, leads=False):
    """``is_alive`` of the row's ``last_seen_at``: the same rule as its status."""
    return reads(field, "last_seen_at", using=STATUS_OF, item=1, leads=leads)


PLAIN = re.compile(r"row\[\d+\]")  # a value that is a column as fetched
PRESIZED_FROM = 8  # plain columns from which a dict is copied from a presized one, not displayed
BUILDER_NAMES = {"make", "build", "fetched", "rows", "append", "row", "answer"}  # the builders' own names
JSON_FIELDS = (serializers.ListField, serializers.DictField, serializers.JSONField)


def _holds_json(serializer_class, key, field):
    """Whether a key's value is a JSON list or object: its field says so, or its model's column does."""
    if isinstance(field, JSON_FIELDS):
        return True
    model = getattr(getattr(serializer_class, "Meta", None), "model", None)
    if model is None:
        return False
    column = model._meta.get_field(key)
    return isinstance(column, (models.JSONField, JSONTextField))


class RowShape:
    """A row serializer compiled: ``columns`` to fetch (``query``), and ``builder(**context)``, a function
    from fetched rows to answer rows, where ``context`` gives the functions the declaration names.
    ``one``: compiled instead to ``answer(**values)``, one answer of a value per column (``answer_builder``)."""

    def __init__(self, serializer_class, json_as_text=True, one=False):
        self.serializer_class, self.json_as_text, self.one, self.presized = serializer_class, json_as_text, one, []
        self.reserved = set()  # names a constant may not take: for one answer, the columns (its parameters)
        self._compile([])
        if self.one and set(self.parameters) & self.constants.keys():  # again, no constant named as a parameter
            self.reserved = set(self.parameters)
            self._compile([])
        elif self.presized:  # again, the largest dict's plain columns fetched first: it zips the row itself
            self._compile(self.presized)

    def _compile(self, first_columns):
        self.columns, self.annotations, self.constants, self.names = list(first_columns), {}, {}, set()
        self.calls, self.statements = {}, []  # per row, before the row's dict: shared calls, large dicts
        display = self._display(self.serializer_class, "")
        assert not self.names & self.constants.keys(), f"a function and a context name alike: {self.names}"
        if self.one:
            clash = set(self.parameters) & (BUILDER_NAMES | self.names | set(self.calls.values()))
            assert not clash, f"a column named as a name of the answer's builder: {clash}"
            lines = [f"def make({', '.join(sorted(self.names))}):",
                     f"    def answer({', '.join(['*', *self.parameters]) if self.parameters else ''}):"]
            lines += [f"        {statement}" for statement in self.statements]
            lines += [f"        return {display}", "    return answer"]
        else:
            lines = [f"def make({', '.join(sorted(self.names))}):", "    def build(fetched):",
                     "        rows = []", "        append = rows.append", "        for row in fetched:"]
            lines += [f"            {statement}" for statement in self.statements]
            lines += [f"            append({display})", "        return rows", "    return build"]
        self.source = "\n".join(lines)
        namespace = dict(self.constants)
        kind = "answer" if self.one else "row"
        exec(compile(self.source, f"<{kind} {self.serializer_class.__name__}>", "exec"), namespace)
        self._make = namespace["make"]

    @property
    def parameters(self):
        """One answer's keyword parameters: its columns, a dotted one (``ranked.candidate.host``) by its first name."""
        return list(dict.fromkeys(column.split(".")[0] for column in self.columns))

    def query(self, queryset):
        """``queryset`` as the ``values_list`` of this row's columns (with ``json_as_text``, for ``raw_rows``
        or ``raw_row_batches``: the JSON text as the driver returns it)."""
        return queryset.annotate(**self.annotations).values_list(*self.columns)

    def builder(self, **context):
        """``build(fetched)`` → answer rows (``one``: ``answer(**values)``); ``context``: the functions named
        by the declaration."""
        missing = self.names - context.keys()
        assert not missing, f"{self.serializer_class.__name__} needs {sorted(missing)}"
        return self._make(**{name: context[name] for name in self.names})

    def answer_builder(self, **context):
        """``answer(**values)``: the one answer of keyword ``values``, one per column (``columns``), each
        value what the column would have fetched; ``context`` as for ``builder``. A column may be an
        attribute path (``reads(field, "ranked.candidate.host")``): the answer's parameter is its first
        name (``ranked``), the value read from it as written, as a hand-written dict would."""
        return RowShape(self.serializer_class, self.json_as_text, one=True).builder(**context)

    def _display(self, serializer_class, prefix):
        """The source of one row's dict of ``serializer_class``: a dict display, or for the one with the most
        plain columns (``PRESIZED_FROM`` or more), fetched first, a presized dict copied and filled by
        zipping its keys with the row (as the hand-written list did: cheaper than 40 keys displayed)."""
        declared = serializer_class._declared_fields
        leading, following = [], []
        for key, field in serializer_class().fields.items():
            read = getattr(declared.get(key), "row_read", None) or Read()
            nested = not read.columns and read.using is None and read.value is NOT_CONSTANT
            if isinstance(field, serializers.BaseSerializer) and nested:
                value = self._display(type(field), prefix + read.prefix)
            else:
                json = self.json_as_text and _holds_json(serializer_class, key, field)
                value = self._value(key, field, read, prefix, json)
            (leading if read.leads else following).append((key, value))
        items = leading + following
        plain = [] if self.one else [(key, int(value[4:-1])) for key, value in items if PLAIN.fullmatch(value)]
        if len(plain) < PRESIZED_FROM:
            return "{" + ", ".join(f"{key!r}: {value}" for key, value in items) + "}"
        keys, positions = zip(*plain)
        if positions != tuple(range(len(positions))):
            if len(positions) > len(self.presized):
                self.presized = [self.columns[position] for position in positions]
            return "{" + ", ".join(f"{key!r}: {value}" for key, value in items) + "}"
        local = f"dict_{len(self.statements)}"
        template = self._constant(dict.fromkeys(key for key, _ in items), "template")
        self.statements.append(f"{local} = {template}.copy()")
        self.statements.append(f"{local}.update(zip({self._constant(keys, 'keys')}, row))")
        self.statements += [f"{local}[{key!r}] = {value}" for key, value in items if not PLAIN.fullmatch(value)]
        return local

    def _value(self, key, field, read, prefix, json):
        if read.value is not NOT_CONSTANT:
            return self._constant(read.value)
        if isinstance(field, Const):
            return self._constant(field.value)
        columns = read.columns or ((Text(prefix + key) if json else prefix + key),)
        arguments = ", ".join(self._read(column) for column in columns)
        using = read.using or (Fragment if json else None)
        if using is None:
            return arguments
        if isinstance(using, str):
            self.names.add(using)
        else:
            using = self._constant(using)
        call = f"{using}({arguments})"
        if read.item is None:
            return call
        if call not in self.calls:
            self.calls[call] = f"value_{len(self.calls)}"
            self.statements.append(f"{self.calls[call]} = {call}")
        return f"{self.calls[call]}[{read.item}]"

    def _read(self, column):
        """The source of a column's value: its place in the row, or for one answer its parameter (or the
        attribute path of one)."""
        position = self._position(column)
        return self.columns[position] if self.one else f"row[{position}]"

    def _position(self, column):
        if not isinstance(column, str):
            self.annotations.setdefault(column.name, column.expression())
            column = column.name
        if column not in self.columns:
            self.columns.append(column)
        return self.columns.index(column)

    def _constant(self, value, kind="constant"):
        if value is None or isinstance(value, (bool, int, float, str)):
            return repr(value)
        name = getattr(value, "__name__", "")  # Fragment(…) reads better in ``source`` than constant_0(…)
        if (not name.isidentifier() or name in BUILDER_NAMES or name in self.reserved
                or self.constants.get(name, value) is not value):
            name = f"{kind}_{len(self.constants)}"
        self.constants[name] = value
        return name


def answers_of(*serializer_classes):
    """``answer(**values)`` of each declaration (``RowShape.answer_builder``), its JSON keys as the values given."""
    return tuple(RowShape(serializer_class, json_as_text=False).answer_builder()
                 for serializer_class in serializer_classes)

"""An answer row's serializer compiled into its builder (``controlplane.api.rows``): fetched rows in,
the declared keys out, read as the declaration says. No database: the rows are tuples in the order of
the shape's ``columns``."""

import operator
import types

import orjson
import pytest
from rest_framework import serializers

from controlplane.api.rows import RowShape, always, reads
from controlplane.api.schema.parts import Const


class Load(serializers.Serializer):
    inflight = serializers.IntegerField(allow_null=True)


class Base(serializers.Serializer):
    host = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())


class Row(Base):
    entry_id = reads(serializers.CharField(), leads=True)
    verdict = reads(serializers.CharField(), "a", "b", using="judge", item=0)
    reason = reads(serializers.CharField(), "a", "b", using="judge", item=1)
    doubled = reads(serializers.IntegerField(), "a", using=lambda a: 2 * a)
    queue = always(serializers.IntegerField(allow_null=True), None)
    load = Load()
    other = reads(Load(), prefix="other__")


def fetched(shape, **values):
    return tuple(values[column] for column in shape.columns)


def test_it_builds_the_declared_keys_with_the_leading_ones_first():
    shape = RowShape(Row)
    calls = []

    def judge(a, b):
        calls.append((a, b))
        return f"{a}>{b}", "why"

    row = fetched(shape, entry_id="e-1", host="h", tags_text='["x"]', a=3, b=2, inflight=7, other__inflight=None)
    [built] = shape.builder(judge=judge)([row])
    assert list(built) == ["entry_id", "host", "tags", "verdict", "reason", "doubled", "queue", "load", "other"]
    assert orjson.loads(orjson.dumps(built)) == {
        "entry_id": "e-1", "host": "h", "tags": ["x"], "verdict": "3>2", "reason": "why", "doubled": 6,
        "queue": None, "load": {"inflight": 7}, "other": {"inflight": None}}
    assert calls == [(3, 2)]  # one call answers both keys


def test_it_splices_a_json_column_as_its_stored_text():
    shape = RowShape(Row)
    assert "tags_text" in shape.annotations and "tags" not in shape.columns
    row = fetched(shape, entry_id="e", host="h", tags_text='[ "a" ,"b"]', a=1, b=1, inflight=None, other__inflight=1)
    [built] = shape.builder(judge=lambda a, b: (None, None))([row])
    assert isinstance(built["tags"], orjson.Fragment)


def test_without_json_as_text_it_reads_the_column_as_decoded():
    shape = RowShape(Row, json_as_text=False)
    assert "tags" in shape.columns and not shape.annotations
    row = fetched(shape, entry_id="e", host="h", tags=["a"], a=1, b=1, inflight=None, other__inflight=1)
    assert shape.builder(judge=lambda a, b: (None, None))([row])[0]["tags"] == ["a"]


def test_it_reads_each_column_once_however_many_keys_read_it():
    assert RowShape(Row).columns.count("a") == 1


def test_it_refuses_a_builder_without_a_function_the_declaration_names():
    with pytest.raises(AssertionError, match="judge"):
        RowShape(Row).builder()


class Answer(serializers.Serializer):
    ok = Const(True)
    total = serializers.IntegerField()
    alive = serializers.IntegerField()
    stale = reads(serializers.IntegerField(), "total", "alive", using=lambda total, alive: total - alive)
    link = reads(Load(allow_null=True), "link")  # a nested row read from a column: its value as given
    load = Load()


def test_it_builds_one_answer_of_keyword_values_one_per_column():
    answer = RowShape(Answer, json_as_text=False).answer_builder()
    built = answer(total=5, alive=3, link=None, inflight=2)
    assert list(built) == ["ok", "total", "alive", "stale", "link", "load"]
    assert built == {"ok": True, "total": 5, "alive": 3, "stale": 2, "link": None, "load": {"inflight": 2}}
    assert answer(total=1, alive=1, link={"inflight": 9}, inflight=None)["link"] == {"inflight": 9}


@pytest.mark.parametrize("values", [
    {"total": 5, "alive": 3, "link": None},  # a column not given
    {"total": 5, "alive": 3, "link": None, "inflight": 2, "stale": 2},  # a value the declaration does not read
])
def test_an_answer_refuses_values_that_are_not_its_columns(values):
    with pytest.raises(TypeError):
        RowShape(Answer, json_as_text=False).answer_builder()(**values)


def test_one_answer_is_one_dict_display_of_its_parameters_with_the_shared_calls_made_once():
    shape = RowShape(Row, json_as_text=False, one=True)
    calls = []

    def judge(a, b):
        calls.append((a, b))
        return "v", "r"

    answer = shape.builder(judge=judge)
    assert "for " not in shape.source and "row[" not in shape.source
    built = answer(entry_id="e", host="h", tags=["x"], a=3, b=2, inflight=1, other__inflight=None)
    assert built == {"entry_id": "e", "host": "h", "tags": ["x"], "verdict": "v", "reason": "r", "doubled": 6,
                     "queue": None, "load": {"inflight": 1}, "other": {"inflight": None}}
    assert calls == [(3, 2)]


class Clashing(serializers.Serializer):
    sub = serializers.IntegerField()
    difference = reads(serializers.IntegerField(), "sub", "b", using=operator.sub)  # a function named as a column


def test_one_answer_names_a_function_apart_from_a_column_of_its_name():
    assert RowShape(Clashing, json_as_text=False).answer_builder()(sub=5, b=2) == {"sub": 5, "difference": 3}


class Placed(serializers.Serializer):
    host = reads(serializers.CharField(), "ranked.candidate.host")
    reasons = reads(serializers.ListField(child=serializers.CharField()), "ranked.reasons", using=list)
    tokens = reads(serializers.IntegerField(), "ranked.blocks", "block_tokens", using=operator.mul)


def test_one_answer_reads_an_attribute_path_of_a_value_given():
    ranked = types.SimpleNamespace(candidate=types.SimpleNamespace(host="h"), reasons=("a",), blocks=3)
    answer = RowShape(Placed, json_as_text=False).answer_builder()
    assert answer(ranked=ranked, block_tokens=16) == {"host": "h", "reasons": ["a"], "tokens": 48}
    with pytest.raises(TypeError):
        answer(ranked=ranked)  # a value it reads, not given

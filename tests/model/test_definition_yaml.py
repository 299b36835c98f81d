"""YAML task definitions: every failure a YamlProblem at its line and column, or an InputError at
its field; dates kept as strings; aliases only where asked."""

from __future__ import annotations

import pytest

from taskyard.model import definition_yaml
from taskyard.model.definition_yaml import YamlProblem
from taskyard.model.errors import InputError


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ("a: !!int abc", "line 1, column 4: ", "the value 'abc' is not a valid !!int"),
        ("a:\n  - !!bool maybe", "line 2, column 5: ", "the value 'maybe' is not a valid !!bool"),
        (
            "a: !!timestamp 99999-01-01",
            "line 1, column 4: ",
            "the value '99999-01-01' is not a valid !!timestamp",
        ),
        ("a: !!float x", "line 1, column 4: ", "the value 'x' is not a valid !!float"),
        ("a: !!int", "line 1, column 4: ", "the value is not a valid !!int"),
        ("a: !foo x", "line 1, column 4: ", "could not determine a constructor for the tag '!foo'"),
        ("a: !!python/name:os.system x", "line 1, column 4: ", "could not determine a constructor"),
        ("a: !!binary aGk=", "line 1, column 4: ", "a !!binary is not a JSON value"),
        ("a: !!timestamp 2026-01-01", "line 1, column 4: ", "a !!timestamp is not a JSON value"),
        ("a: &x 1\nb: *x", "line 2, column 4: ", "aliases (*name) are not accepted"),
    ],
)
def test_problems_name_the_line_and_column(text: str, where: str, problem: str) -> None:
    with pytest.raises(YamlProblem) as info:
        definition_yaml.load(text)
    assert info.value.where == where and info.value.problem.startswith(problem), info.value


def test_dates_stay_strings_and_aliases_are_read_where_asked() -> None:
    assert definition_yaml.load("a: 2026-01-01\nb: 2026-01-01T00:00:00Z") == {
        "a": "2026-01-01",
        "b": "2026-01-01T00:00:00Z",
    }
    assert definition_yaml.load("a: &x [1]\nb: *x", aliases=True) == {"a": [1], "b": [1]}


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({1: "x"}, "task: the key 1 must be a string"),
        ({"a": [float("nan")]}, "task.a[0]: must be a finite number"),
        ({"a": 2**64}, "task.a: must be a whole number from"),
        ({"a": -(2**63) - 1}, "task.a: must be a whole number from"),
        ({"a": ("x",)}, "task.a: a tuple is not a JSON value"),
        ({"a": ["ok", "\ud800"]}, "task.a[1]: holds a lone UTF-16 surrogate"),
        ({"\udc00": 1}, "task: the key '\\udc00' holds a lone UTF-16 surrogate"),
    ],
)
def test_check_json_names_the_field(value: object, says: str) -> None:
    with pytest.raises(InputError) as info:
        definition_yaml.check_json(value, "task")
    assert info.value.message.startswith(says), info.value.message
    definition_yaml.check_json({"a": [2**64 - 1, -(2**63), True, None, 1.5, "s"]}, "task")

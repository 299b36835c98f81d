from __future__ import annotations

import math
import random
from typing import Any

import pytest

from taskyard.model import dates, errors, schema

IDENT = r"^[a-zA-Z0-9-_]{1,38}$"


def error_of(rule: schema.Schema, value: Any, where: str = "body") -> str:
    with pytest.raises(errors.InputValidationError) as info:
        schema.validate(rule, value, where=where)
    assert info.value.code == "InputValidationError"
    assert info.value.status == 400
    return info.value.message


# string ----------------------------------------------------------------------------------------


def test_string_accepts_matching_value() -> None:
    schema.validate(schema.string(pattern=IDENT, min_length=1, max_length=38), "abc-_09")


@pytest.mark.parametrize("value", [None, 1, 1.5, True, [], {}])
def test_string_refuses_other_types(value: Any) -> None:
    assert error_of(schema.string(), value).startswith("body must be a string, not ")


def test_string_pattern_message_names_the_pattern() -> None:
    assert error_of(schema.string(pattern=IDENT), "a.b") == f"body must match {IDENT}"


def test_string_pattern_dollar_means_the_very_end() -> None:
    # Python's `$` also matches before a final newline; JavaScript's does not.
    assert "must match" in error_of(schema.string(pattern=IDENT), "abc\n")


def test_string_pattern_is_a_search_like_json_schema() -> None:
    schema.validate(schema.string(pattern="b"), "abc")
    schema.validate(schema.string(pattern=r"^(https?://|ssh://|git@)"), "git@github.com:a/b")


def test_string_lengths() -> None:
    assert error_of(schema.string(max_length=255), "x" * 256) == (
        "body must be at most 255 characters; it has 256"
    )
    assert error_of(schema.string(min_length=1), "") == "body must be at least 1 character; it has 0"
    schema.validate(schema.string(max_length=255), "x" * 255)


def test_string_refuses_a_nul_unless_told_to_keep_it() -> None:
    assert error_of(schema.string(), "a\x00b") == "body must not contain a NUL character (\\u0000)"
    schema.validate(schema.string(nul=True), "a\x00b")


def test_string_length_counts_code_points() -> None:
    schema.validate(schema.string(max_length=2), "\U0001f600\U0001f600")


def test_string_length_checked_before_pattern() -> None:
    assert "at most" in error_of(schema.string(pattern="^a$", max_length=1), "bb")


# integer and boolean ---------------------------------------------------------------------------


def test_integer_bounds() -> None:
    rule = schema.integer(minimum=0, maximum=49)
    schema.validate(rule, 0)
    schema.validate(rule, 49)
    assert error_of(rule, -1) == "body must be at least 0"
    assert error_of(rule, 50) == "body must be at most 49"


def test_bool_is_not_an_integer() -> None:
    assert error_of(schema.integer(), True) == "body must be an integer, not a boolean"
    assert error_of(schema.integer(), False) == "body must be an integer, not a boolean"


def test_integral_float_is_an_integer_as_in_json_schema() -> None:
    schema.validate(schema.integer(maximum=49), 5.0)
    assert error_of(schema.integer(), 5.5) == "body must be an integer, not a number"


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_non_finite_floats_are_not_integers(value: float) -> None:
    assert "must be an integer" in error_of(schema.integer(), value)


def test_huge_integers_are_compared_not_printed() -> None:
    huge = 10**5000  # str() of this raises ValueError in Python 3.11+
    assert error_of(schema.integer(maximum=49), huge) == "body must be at most 49"
    assert error_of(schema.integer(minimum=0), -huge) == "body must be at least 0"
    assert error_of(schema.string(), huge) == "body must be a string, not an integer"


def test_boolean() -> None:
    schema.validate(schema.boolean(), False)
    assert error_of(schema.boolean(), 0) == "body must be a boolean, not an integer"
    assert error_of(schema.boolean(), None) == "body must be a boolean, not null"


# enum ------------------------------------------------------------------------------------------


def test_enum_lists_the_choices() -> None:
    rule = schema.enum("highest", "very-high", "lowest")
    schema.validate(rule, "lowest")
    assert error_of(rule, "normal") == "body must be one of: highest, very-high, lowest"


def test_enum_compares_as_json() -> None:
    assert "must be one of: 1, null" in error_of(schema.enum(1, None), True)
    schema.validate(schema.enum(1), 1.0)
    schema.validate(schema.enum(True), True)
    assert "must be one of" in error_of(schema.enum("a"), ["a"])
    assert "must be one of" in error_of(schema.enum("a"), {"a": 1})


# array -----------------------------------------------------------------------------------------


def test_array_items_are_checked_with_their_index() -> None:
    rule = schema.array(schema.string(pattern=IDENT))
    schema.validate(rule, ["a", "b"])
    assert error_of(rule, ["a", "b", "c.d"]) == f"body[2] must match {IDENT}"
    assert error_of(rule, "abc") == "body must be an array, not a string"
    assert error_of(rule, {"0": "a"}) == "body must be an array, not an object"


def test_array_size_limits() -> None:
    assert error_of(schema.array(max_items=2), [1, 2, 3]) == "body must have at most 2 items; it has 3"
    assert error_of(schema.array(min_items=1), []) == "body must have at least 1 item; it has 0"


def test_array_max_items_checked_before_items() -> None:
    assert "at most 1 item" in error_of(schema.array(schema.string(), max_items=1), [1, 2])


def test_array_unique() -> None:
    rule = schema.array(unique=True)
    schema.validate(rule, ["a", "b", 1, True, None, [1], {"a": 1}, {"a": 2}])
    assert error_of(rule, ["a", "b", "a"]) == "body must not contain duplicates; items 0 and 2 are equal"
    assert "items 0 and 1" in error_of(rule, [{"a": [1]}, {"a": [1]}])
    assert "items 0 and 1" in error_of(rule, [1, 1.0])
    schema.validate(rule, [1, True])  # JSON's true is not 1
    schema.validate(rule, [0, False])


def test_array_items_checked_before_uniqueness() -> None:
    rule = schema.array(schema.string(min_length=1), unique=True)
    assert error_of(rule, ["x", ""]) == "body[1] must be at least 1 character; it has 0"
    assert "uniqu" not in error_of(rule, ["", ""])


# object ----------------------------------------------------------------------------------------

META = schema.obj(
    {"name": schema.string(max_length=3), "source": schema.string(pattern="^https://")},
    required=["name", "source"],
    additional=False,
)
BODY = schema.obj({"metadata": META, "payload": schema.any_object()}, required=["metadata"], additional=False)


def test_object_accepts_valid_value() -> None:
    schema.validate(BODY, {"metadata": {"name": "a", "source": "https://x"}, "payload": {"any": [1]}})


def test_object_paths_name_the_field() -> None:
    message = error_of(BODY, {"metadata": {"name": "abcd", "source": "https://x"}})
    assert message == "body.metadata.name must be at most 3 characters; it has 4"


def test_object_required() -> None:
    assert error_of(BODY, {}) == "body.metadata is required"
    assert error_of(BODY, {"metadata": {"name": "a"}}) == "body.metadata.source is required"


def test_object_unknown_property() -> None:
    message = error_of(BODY, {"metadata": {"name": "a", "source": "https://x"}, "zzz": 1})
    assert message == "body.zzz is not allowed (unknown property)"


def test_object_unknown_property_reported_in_sorted_order() -> None:
    said = error_of(BODY, {"metadata": {}, "b": 1, "a": 1}).splitlines()
    assert said[1:3] == [
        "- body.a is not allowed (unknown property)",
        "- body.b is not allowed (unknown property)",
    ]


def test_object_order_unknown_then_required_then_declared() -> None:
    assert "unknown property" in error_of(BODY, {"metdata": {}})
    assert error_of(BODY, {"payload": {}}) == "body.metadata is required"
    rule = schema.obj({"a": schema.string(), "b": schema.string()})
    assert error_of(rule, {"b": 1, "a": 1}).splitlines() == [
        "body has 2 problems:",
        "- body.a must be a string, not an integer",
        "- body.b must be a string, not an integer",
    ]


def test_every_problem_is_reported_at_once() -> None:
    said = error_of(BODY, {"metdata": {}, "payload": 1, "nested": {"x": 1}})
    assert said.startswith("body has ") and "body.metdata is not allowed" in said
    assert "body.metadata is required" in said


def test_object_additional_schema() -> None:
    tags = schema.obj(additional=schema.string(max_length=4))
    schema.validate(tags, {"a": "abcd", "b": ""})
    assert error_of(tags, {"b": "x", "a": 1}) == "body.a must be a string, not an integer"
    assert error_of(tags, {"k": "abcde"}) == "body.k must be at most 4 characters; it has 5"


def test_object_refuses_other_types() -> None:
    for value in (None, [], "x", 1, True):
        assert error_of(BODY, value).startswith("body must be an object, not ")


def test_object_odd_keys_are_quoted_and_truncated() -> None:
    tags = schema.obj(additional=schema.string())
    assert error_of(tags, {"a.b": 1}).startswith('body["a.b"] must be')
    long_key = "é" * 1000
    message = error_of(tags, {long_key: 1})
    assert len(message) < 500
    assert message.startswith('body["\\u00e9')


def test_any_object() -> None:
    schema.validate(schema.any_object(), {"x": [None, {"y": 10**5000}]})
    assert error_of(schema.any_object(), []) == "body must be an object, not an array"


def test_where_prefixes_the_path() -> None:
    assert error_of(BODY, {}, where="payload") == "payload.metadata is required"


# date-time -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "2024-01-31T12:00:00.000Z",
        "2024-01-31T12:00:00Z",
        "2024-01-31T12:00:00.123456789Z",
        "2024-01-31t12:00:00.1z",
        "2024-01-31 12:00:00+01:00",
        "2024-01-31T12:00:00-0530",
        "1970-01-01T00:00:00.000Z",
        "1970-01-01T01:00:00+01:00",
        "9998-12-31T23:59:59.999Z",
        "9999-01-01T00:00:00+00:01",  # 9998-12-31T23:59Z
    ],
)
def test_date_time_accepts(value: str) -> None:
    schema.validate(schema.date_time(), value)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "2024-01-31",
        "2024-01-31T12:00:00",  # no timezone
        "2024-02-30T12:00:00Z",
        "2024-01-31T25:00:00Z",
        "20240131T120000Z",
        " 2024-01-31T12:00:00Z",
        "2024-01-31T12:00:00Z\n",
        "next tuesday",
    ],
)
def test_date_time_refuses(value: str) -> None:
    assert error_of(schema.date_time(), value).startswith("body must be a date-time with a timezone")


@pytest.mark.parametrize(
    "value",
    [
        "9999-01-01T00:00:00.000Z",  # the year 9999 is headroom for what taskyard adds to a date
        "9999-12-31T23:59:59.999Z",
        "9999-12-31T23:00:00-05:00",  # year 10000 in UTC
        "1969-12-31T23:59:59.999Z",
        "1970-01-01T00:59:59+01:00",  # 1969 in UTC
        "0001-01-01T00:00:00.000Z",
        "0001-01-01T00:00:00+01:00",  # year 0 in UTC
    ],
)
def test_date_time_refuses_what_a_client_may_not_send(value: str) -> None:
    assert error_of(schema.date_time(), value) == (
        "body must be a date-time from 1970-01-01T00:00:00.000Z to 9998-12-31T23:59:59.999Z"
    )
    with pytest.raises(dates.OutOfRange):
        schema.to_millis(value)


def test_date_time_refuses_non_strings() -> None:
    assert error_of(schema.date_time(), 1706702400000) == "body must be a string, not an integer"


def test_to_millis() -> None:
    assert schema.to_millis("1970-01-01T00:00:01.5Z") == 1500
    assert schema.to_millis("1970-01-01 01:00:00+01:00") == 0
    with pytest.raises(ValueError):
        schema.to_millis("1970-01-01")


# robustness ------------------------------------------------------------------------------------


def random_json(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(10 if depth < 4 else 7)
    scalars: list[Any] = [
        None,
        rng.choice([True, False]),
        rng.choice([0, -1, 5, 49, 50, 10**400, -(10**400)]),
        rng.choice([0.5, 5.0, 1e308, math.inf, math.nan, -0.0]),
        rng.choice(["", "a", "x" * 300, "2024-01-31T12:00:00Z", "\x00\n", "é" * 40, "abc:**"]),
        rng.choice(["highest", "normal", "all-resolved", "aa/bb", "https://x", "git@x"]),
        rng.choice(["created", "deadline", "payload", "metadata", "tags", "name"]),
    ]
    if kind < 7:
        return scalars[kind]
    size = rng.randrange(4)
    if kind < 9:
        return [random_json(rng, depth + 1) for _ in range(size)]
    return {str(random_json(rng, 4)): random_json(rng, depth + 1) for _ in range(size)}


RULES = [
    schema.string(pattern=IDENT, min_length=1, max_length=38),
    schema.integer(minimum=0, maximum=49),
    schema.boolean(),
    schema.enum("a", 1, None, [1]),
    schema.array(schema.any_object(), max_items=2, unique=True),
    schema.array(unique=True),
    schema.date_time(),
    schema.any_object(),
    BODY,
    schema.obj(additional=schema.obj(additional=schema.array(schema.integer()))),
]


@pytest.mark.parametrize("seed", range(20))
def test_garbage_only_ever_raises_input_validation_error(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(200):
        value = random_json(rng)
        for rule in RULES:
            try:
                schema.validate(rule, value)
            except errors.InputValidationError as exc:
                assert exc.message.startswith("body")


def test_deep_nesting_is_an_input_validation_error() -> None:
    value: Any = []
    for _ in range(100_000):
        value = [value]
    message = error_of(schema.array(schema.array(), unique=True), [value, value])
    assert message in (
        "body is nested too deeply",
        "body must not contain duplicates; items 0 and 1 are equal",
    )


def test_non_string_keys_are_refused() -> None:
    assert error_of(schema.any_object(), {1: "a"}) == "body must have only string keys"


@pytest.mark.parametrize("value", [0, 1.5, -2e10])
def test_number_accepts_finite_numbers(value: object) -> None:
    schema.validate(schema.number(), value)


@pytest.mark.parametrize("value", [True, "1", None, math.inf, math.nan])
def test_number_refuses_the_rest(value: object) -> None:
    with pytest.raises(errors.InputValidationError, match=r"body must be a (finite )?number"):
        schema.validate(schema.number(), value)


def test_any_of_accepts_a_value_matching_one_choice_and_names_every_rule_otherwise() -> None:
    rule = schema.any_of(schema.date_time(), schema.null())
    schema.validate(rule, None)
    schema.validate(rule, "2024-01-31T12:00:00.000Z")
    with pytest.raises(errors.InputValidationError) as raised:
        schema.validate(rule, 5)
    assert raised.value.message == (
        "body must match one of its forms: body must be a string, not an integer; body must be one of: null"
    )


def test_anything_accepts_any_json_value() -> None:
    for value in (None, 1, "x", [1], {"a": {}}):
        schema.validate(schema.anything(), value)
    assert schema.anything().json() == {}

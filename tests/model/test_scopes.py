"""Scopes, expressions, templates and the 403 message, against known-good vectors (docs/protocol.md)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from taskyard.api import queue_v1
from taskyard.model import scopes

# held | expression | satisfied | scopesSatisfying
SATISFACTION: list[tuple[list[str], Any, bool, list[str] | None]] = [
    ([], {"AllOf": []}, True, []),
    ([], {"AnyOf": []}, False, None),
    (["A", "B"], "A", True, ["A"]),
    (["a*", "b*", "c*"], "abc", True, ["abc"]),
    (["abc*"], {"AnyOf": ["abc", "def"]}, True, ["abc"]),
    (["abc", "def"], {"AnyOf": ["abc", "def"]}, True, ["abc", "def"]),
    (["ghi*"], {"AnyOf": ["abc", "def"]}, False, None),
    (["abc*"], {"AllOf": ["abc", "ghi"]}, False, None),
    ([""], {"AnyOf": ["abc", "def"]}, False, None),
    (["a*", "b*", "c*"], {"AllOf": ["bx", "cx", {"AnyOf": ["xxx", "yyyy"]}]}, False, None),
    (
        ["a*", "b*", "c*"],
        {"AnyOf": [{"AllOf": ["ax", "jx"]}, {"AllOf": ["bx", "cx"]}, "bbb"]},
        True,
        ["bbb", "bx", "cx"],
    ),
    (["xyz", "abc"], {"AllOf": [{"AnyOf": [{"AllOf": ["foo"]}, {"AllOf": ["bar"]}]}]}, False, None),
    (["foo:**"], "foo:*", True, ["foo:*"]),
    (["foo:**"], "foo:abc", False, None),
    (["*"], "", True, [""]),
    (["foo:*:bing"], "foo:bar:bing", False, None),
    (["foo:"], "foo:bar", False, None),
    (["Foo:bar"], "foo:bar", False, None),
    (["a"], "a*", False, None),
]


@pytest.mark.parametrize(("held", "expr", "satisfied", "satisfying"), SATISFACTION)
def test_satisfaction_vectors(
    held: list[str], expr: Any, satisfied: bool, satisfying: list[str] | None
) -> None:
    assert scopes.satisfies_expression(held, expr) is satisfied
    assert scopes.scopes_satisfying(held, expr) == satisfying
    scopes.validate_expression(expr)
    if isinstance(expr, str):
        assert scopes.satisfies(held, expr) is satisfied
        assert scopes.satisfies_all(held, [expr]) is satisfied


def test_satisfaction_takes_any_iterable_once() -> None:
    assert scopes.satisfies((s for s in ["x", "a*"]), "ab")
    assert scopes.satisfies_expression(iter(["a*"]), {"AllOf": ["ab", "ac"]})
    assert scopes.satisfies_all(iter(["a*", "b"]), ["ab", "b"])
    assert not scopes.satisfies_all(["a*"], ["ab", "b"])
    assert scopes.satisfies_all([], [])


def test_star_is_literal_except_at_the_end() -> None:
    assert scopes.satisfies(["a*b"], "a*b")
    assert not scopes.satisfies(["a*b"], "axb")
    assert scopes.satisfies(["foo:**"], "foo:*123")
    assert scopes.satisfies(["*"], "anything at all")
    assert scopes.satisfies_all(["a*", "b"], ["abc", "b", "a"])
    assert not scopes.satisfies_all(["a"], ["a*"])
    assert not scopes.satisfies_all(["foo:*:bing"], ["foo:bar:bing"])
    assert scopes.satisfies_all(["*"], [""])


@pytest.mark.parametrize(
    ("held", "expr", "unsatisfied"),
    [
        (["a"], {"AllOf": ["a", "b"]}, "b"),
        (["c"], {"AnyOf": ["a", "b"]}, {"AnyOf": ["a", "b"]}),
        (["a"], {"AnyOf": ["a", "b"]}, None),
        (["ghi"], {"AllOf": ["abc", "def", "ghi"]}, {"AllOf": ["abc", "def"]}),
        (
            ["xyz", "abc"],
            {"AllOf": [{"AnyOf": [{"AllOf": ["foo"]}, {"AllOf": ["bar"]}]}]},
            {"AnyOf": ["foo", "bar"]},
        ),
        (
            ["a*", "b*"],
            {"AllOf": ["c", {"AnyOf": ["ax", "d"]}, {"AnyOf": ["e", "f"]}]},
            {"AllOf": ["c", {"AnyOf": ["e", "f"]}]},
        ),
        ([], {"AllOf": []}, None),
        ([], {"AnyOf": []}, {"AnyOf": []}),
        ([], {"AnyOf": ["x"]}, "x"),
    ],
)
def test_remove_given_scopes_vectors(held: list[str], expr: Any, unsatisfied: Any) -> None:
    assert scopes.remove_given_scopes(held, expr) == unsatisfied


@pytest.mark.parametrize(
    ("scope", "valid"),
    [
        ("", True),
        (" ", True),
        ("queue:create-task:*", True),
        ("~", True),
        ("\x7f", False),
        ("\n", False),
        ("é", False),
        ("\x1f", False),
        (5, False),
        (None, False),
    ],
)
def test_valid_scope(scope: object, valid: bool) -> None:
    assert scopes.valid_scope(scope) is valid


@pytest.mark.parametrize("expr", ["", "a", {"AllOf": []}, {"AnyOf": ["a", {"AllOf": ["b", {"AnyOf": []}]}]}])
def test_valid_expressions(expr: Any) -> None:
    scopes.validate_expression(expr)


@pytest.mark.parametrize(
    "expr",
    [
        5,
        None,
        ["a"],
        "bad\nscope",
        {},
        {"OneOf": ["a"]},
        {"AllOf": "a"},
        {"AllOf": [], "AnyOf": []},
        {"AllOf": ["a", {"AnyOf": [7]}]},
        {"AnyOf": ["\x00"]},
    ],
)
def test_invalid_expressions(expr: Any) -> None:
    with pytest.raises(ValueError):
        scopes.validate_expression(expr)


def test_malformed_expression_is_a_value_error_when_evaluated() -> None:
    with pytest.raises(ValueError):
        scopes.satisfies_expression(["a"], {"OneOf": ["a"]})


# ---------------------------------------------------------------------------------------------------
# Sort, normalize, merge


def test_sort_order_of_the_reference() -> None:
    ordered = ["*", "", "**", "aaa*", "aaa", "aaa**", "x%", "x*a", "xa*", "xa"]
    shuffled = list(reversed(ordered))
    assert sorted(shuffled, key=scopes.scope_sort_key) == ordered


def test_sort_vector() -> None:
    given = ["test-12", "test-2", "test-11", "test-1", "test-1*", "test-13", "test-3", "test-10", "test-*"]
    expected = ["test-*", "test-1*", "test-1", "test-10", "test-11", "test-12", "test-13", "test-2", "test-3"]
    assert sorted(given, key=scopes.scope_sort_key) == expected


def test_normalize_vector() -> None:
    assert scopes.normalize(["abc", "abx*", "ab*", "b", "b*", "abc*"]) == ["ab*", "b*"]


def test_normalize_drops_duplicates_and_covered() -> None:
    assert scopes.normalize(["b", "a", "b", "a"]) == ["a", "b"]
    assert scopes.normalize(["x", "*", "y"]) == ["*"]
    assert scopes.normalize([]) == []
    assert scopes.normalize(["a**", "a*b", "a*"]) == ["a*"]


def test_merge_vector() -> None:
    a = ["b*", "ab", "aa", "a*", "c", "ca", "da*"]
    b = ["b*", "ab", "aa", "a*", "abc", "ab*", "ca", "daa"]
    assert scopes.merge(a, b) == ["a*", "b*", "c", "ca", "da*"]


# ---------------------------------------------------------------------------------------------------
# Templates


def test_render_placeholders() -> None:
    assert scopes.render("queue:get-task:<taskId>", {"taskId": "abc"}) == "queue:get-task:abc"
    rendered = scopes.render("queue:reclaim-task:<taskId>/<runId>", {"taskId": "t", "runId": 0})
    assert rendered == "queue:reclaim-task:t/0"
    assert scopes.render("no placeholders", {}) == "no placeholders"


def test_other_angle_brackets_stay_literal() -> None:
    template = "a:<..>:<1x>:<a-b>:< x>:<>:<x"
    assert scopes.render(template, {"x": "X"}) == template


def test_substituted_values_are_not_rescanned() -> None:
    params = {"scope": "secrets:get:<name>", "name": "leaked", "a": "<b>", "b": "no"}
    assert scopes.render("<scope>", params) == "secrets:get:<name>"
    assert scopes.render("<a><b>", params) == "<b>no"
    listed = scopes.render({"AllOf": [{"for": "s", "in": "scopes", "each": "<s>"}]}, {"scopes": ["x:<name>"]})
    assert listed == {"AllOf": ["x:<name>"]}


@pytest.mark.parametrize(
    "params",
    [{}, {"taskId": None}, {"taskId": True}, {"taskId": 1.5}, {"taskId": ["a"]}, {"taskId": {"a": 1}}],
)
def test_render_rejects_missing_or_wrong_values(params: dict[str, Any]) -> None:
    with pytest.raises(scopes.TemplateError, match="'taskId'"):
        scopes.render({"AnyOf": ["queue:status:<taskId>"]}, params)


def test_template_error_is_a_value_error() -> None:
    assert issubclass(scopes.TemplateError, ValueError)


def test_render_compound_and_for() -> None:
    template = {
        "AllOf": [
            "a:<x>",
            {"for": "item", "in": "items", "each": "b:<item>:<x>"},
            {"AnyOf": [{"for": "item", "in": "items", "each": "c:<item>"}, "d"]},
        ]
    }
    rendered = scopes.render(template, {"x": "X", "items": ["1", 2]})
    assert rendered == {"AllOf": ["a:X", "b:1:X", "b:2:X", {"AnyOf": ["c:1", "c:2", "d"]}]}
    # The loop variable shadows a parameter of the same name only inside `each`.
    shadowed = scopes.render(
        {"AllOf": [{"for": "x", "in": "items", "each": "<x>"}, "<x>"]}, {"x": "X", "items": ["i"]}
    )
    assert shadowed == {"AllOf": ["i", "X"]}


def test_for_needs_an_array() -> None:
    template = {"AllOf": [{"for": "item", "in": "items", "each": "b:<item>"}]}
    assert scopes.render(template, {"items": ()}) == {"AllOf": []}
    for bad in ({}, {"items": "abc"}, {"items": None}):
        with pytest.raises(scopes.TemplateError, match="'items'"):
            scopes.render(template, bad)


def test_for_at_the_top_or_malformed_is_an_error() -> None:
    with pytest.raises(scopes.TemplateError):
        scopes.render({"for": "a", "in": "b", "each": "<a>"}, {"b": ["x"]})
    for item in (
        {"for": "a", "in": "b"},
        {"for": "a", "in": "b", "each": {"AllOf": []}},
        {"for": "1a", "in": "b", "each": "x"},
        {"for": "a", "in": "b", "each": "x", "extra": 1},
    ):
        with pytest.raises(scopes.TemplateError):
            scopes.render({"AllOf": [item]}, {"b": ["x"]})


def test_if_then_else() -> None:
    template = {"if": "public", "then": {"AllOf": []}, "else": "secret:<name>"}
    assert scopes.render(template, {"public": True, "name": "n"}) == {"AllOf": []}
    assert scopes.render(template, {"public": False, "name": "n"}) == "secret:n"


def test_false_if_without_else_makes_the_call_public_or_drops_the_item() -> None:
    top = {"if": "private", "then": "secrets:get:<name>"}
    assert scopes.render(top, {"private": False}) is None
    assert scopes.render(top, {"private": True, "name": "n"}) == "secrets:get:n"
    inside = {"AllOf": ["a", {"if": "extra", "then": {"AnyOf": ["b", "c"]}}]}
    assert scopes.render(inside, {"extra": False}) == {"AllOf": ["a"]}
    assert scopes.render(inside, {"extra": True}) == {"AllOf": ["a", {"AnyOf": ["b", "c"]}]}


@pytest.mark.parametrize("value", [None, 0, 1, "true", "yes"])
def test_if_needs_a_real_boolean(value: object) -> None:
    params = {} if value is None else {"flag": value}
    with pytest.raises(scopes.TemplateError, match="'flag'"):
        scopes.render({"if": "flag", "then": "a"}, params)


@pytest.mark.parametrize(
    "template",
    [5, {}, {"OneOf": ["a"]}, {"AllOf": "a"}, {"if": "f"}, {"if": "f", "then": "a", "other": "b"}],
)
def test_malformed_templates(template: Any) -> None:
    with pytest.raises(scopes.TemplateError):
        scopes.render(template, {"f": True})


def create_task_params(**changes: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "scopes": ["secrets:get:project/x", "docker-worker:cache:<name>"],
        "routes": ["index.project.x.latest", "notify.email.a@b.c.on-failed"],
        "projectId": "proj",
        "schedulerId": "sched",
        "priorities": ["high", "very-high", "highest"],
        "taskQueueId": "prov/worker-a",
    }
    params.update(changes)
    return params


def test_render_create_task_template() -> None:
    rendered = scopes.render(queue_v1.CREATE_TASK_SCOPES, create_task_params())
    assert rendered == {
        "AllOf": [
            "secrets:get:project/x",
            "docker-worker:cache:<name>",
            "queue:route:index.project.x.latest",
            "queue:route:notify.email.a@b.c.on-failed",
            "queue:create-task:project:proj",
            "queue:scheduler-id:sched",
            {
                "AnyOf": [
                    "queue:create-task:high:prov/worker-a",
                    "queue:create-task:very-high:prov/worker-a",
                    "queue:create-task:highest:prov/worker-a",
                ]
            },
        ]
    }
    assert rendered is not None
    scopes.validate_expression(rendered)
    held = [
        "secrets:get:project/*",
        "docker-worker:cache:<name>",
        "queue:route:index.*",
        "queue:route:notify.*",
        "queue:create-task:project:*",
        "queue:scheduler-id:sched",
        "queue:create-task:highest:prov/*",
    ]
    assert scopes.satisfies_expression(held, rendered)
    # `<name>` from the task's own scopes is literal: `docker-worker:cache:foo` does not satisfy it.
    wrong = ["docker-worker:cache:foo" if s.endswith("<name>") else s for s in held]
    assert not scopes.satisfies_expression(wrong, rendered)
    assert scopes.remove_given_scopes(wrong, rendered) == "docker-worker:cache:<name>"


def test_render_create_task_template_with_empty_lists() -> None:
    rendered = scopes.render(queue_v1.CREATE_TASK_SCOPES, create_task_params(scopes=[], routes=[]))
    assert rendered == {
        "AllOf": [
            "queue:create-task:project:proj",
            "queue:scheduler-id:sched",
            {
                "AnyOf": [
                    "queue:create-task:high:prov/worker-a",
                    "queue:create-task:very-high:prov/worker-a",
                    "queue:create-task:highest:prov/worker-a",
                ]
            },
        ]
    }
    with pytest.raises(scopes.TemplateError, match="'taskQueueId'"):
        scopes.render(queue_v1.CREATE_TASK_SCOPES, create_task_params(taskQueueId=None))


def test_every_route_template_is_well_formed() -> None:
    """Rendering with every name bound (strings, or arrays for `for`) yields a valid expression."""
    for route in queue_v1.ROUTES:
        if route.scopes is None:
            continue
        params = _bind_all(route.scopes)
        rendered = scopes.render(route.scopes, params)
        assert rendered is not None, route.name
        scopes.validate_expression(rendered)


def _bind_all(template: Any) -> dict[str, Any]:
    text = json.dumps(template)
    params: dict[str, Any] = {name: "v" for name in _names(text)}
    for source in _loop_sources(template):
        params[source] = ["x", "y"]
    return params


def _names(text: str) -> set[str]:
    return set(re.findall(r"<([a-zA-Z][a-zA-Z0-9_]*)>", text))


def _loop_sources(template: Any) -> list[str]:
    if isinstance(template, dict):
        found = [template["in"]] if "for" in template else []
        return found + [s for v in template.values() for s in _loop_sources(v)]
    if isinstance(template, list):
        return [s for v in template for s in _loop_sources(v)]
    return []


# ---------------------------------------------------------------------------------------------------
# The 403 message


def test_insufficient_scopes_message_for_a_client() -> None:
    required = {"AllOf": ["queue:create-task:project:p", {"AnyOf": ["a", "b"]}]}
    unsatisfied = {"AnyOf": ["a", "b"]}
    message = scopes.format_insufficient("my-client", unsatisfied, required)
    assert message == (
        "Client ID my-client does not have sufficient scopes and is missing the following scopes:\n"
        "\n"
        "```\n"
        "{\n"
        '  "AnyOf": [\n'
        '    "a",\n'
        '    "b"\n'
        "  ]\n"
        "}\n"
        "```\n"
        "\n"
        "This request requires the client to satisfy the following scope expression:\n"
        "\n"
        "```\n"
        "{\n"
        '  "AllOf": [\n'
        '    "queue:create-task:project:p",\n'
        "    {\n"
        '      "AnyOf": [\n'
        '        "a",\n'
        '        "b"\n'
        "      ]\n"
        "    }\n"
        "  ]\n"
        "}\n"
        "```"
    )


def test_insufficient_scopes_message_with_bare_strings() -> None:
    message = scopes.format_insufficient("c", "queue:status:t", "queue:status:t")
    assert message == (
        "Client ID c does not have sufficient scopes and is missing the following scopes:\n\n"
        "```\nqueue:status:t\n```\n\n"
        "This request requires the client to satisfy the following scope expression:\n\n"
        "```\nqueue:status:t\n```"
    )


def test_insufficient_scopes_message_for_an_anonymous_caller() -> None:
    message = scopes.format_insufficient(None, "x", {"AllOf": []})
    assert message == (
        "This request requires Taskcluster credentials that satisfy the following scope expression:\n\n"
        '```\n{\n  "AllOf": []\n}\n```'
    )


def test_a_template_split_once_is_filled_anew_for_every_call() -> None:
    # `_fill` memoizes how a template splits around its placeholders, never the values.
    template = "queue:create-task:<priority>:<taskQueueId>"
    assert scopes.render(template, {"priority": "low", "taskQueueId": "p/a"}) == "queue:create-task:low:p/a"
    assert scopes.render(template, {"priority": "high", "taskQueueId": "p/b"}) == "queue:create-task:high:p/b"
    assert scopes.render("<a><b>", {"a": "<b>", "b": 1}) == "<b>1"
    with pytest.raises(scopes.TemplateError, match="'taskQueueId' is missing"):
        scopes.render(template, {"priority": "low"})


def test_a_tuple_of_held_scopes_is_indexed_once_and_answers_for_itself_only() -> None:
    # Tuples (a caller's expanded scopes) share one index; another tuple gets its own.
    held = ("queue:create-task:*", "assume:anonymous")
    assert scopes._index(held) is scopes._index(tuple(held))
    assert scopes.satisfies_all(held, ["queue:create-task:lowest:p/w"])
    assert not scopes.satisfies_all(("queue:create-task:lowest:p/x",), ["queue:create-task:lowest:p/w"])
    assert scopes.satisfies_expression(("a",), {"AnyOf": ["a", "b"]})
    assert not scopes.satisfies_expression(("c",), {"AnyOf": ["a", "b"]})
    assert scopes.remove_given_scopes(("a",), {"AllOf": ["a", "b"]}) == "b"
    assert scopes.scopes_satisfying(("a*",), {"AllOf": ["ab", "ac"]}) == ["ab", "ac"]
    assert scopes.satisfies_all(["x*"], ["xy"]) and not scopes.satisfies_all(iter(["x"]), ["xy"])

from __future__ import annotations

import random
from typing import Any

import pytest

from taskyard.model import dates, errors, slugid, task_definition

NOW = dates.parse_iso("2024-03-01T12:00:00.000Z")
TASK_ID = "fN1SbArXTPSVFNUvaOlinQ"
OTHER_ID = "DAbQM0_zTfyPxgoaA7JBPA"
PRIORITY_CHOICES = "highest, very-high, high, medium, low, very-low, lowest"


def iso(offset_ms: int = 0) -> str:
    return dates.to_iso(NOW + offset_ms)


def make_body(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "taskQueueId": "prov-1/worker-a",
        "created": iso(),
        "deadline": iso(dates.DAY),
        "payload": {},
        "metadata": {
            "name": "test task",
            "description": "a task for the tests",
            "owner": "someone@example.com",
            "source": "https://github.com/example/repo",
        },
    }
    for key, value in changes.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    return body


def check(body: object, **kwargs: Any) -> dict[str, Any]:
    return task_definition.validate(TASK_ID, body, now=NOW, **kwargs)


def validation_error(body: object) -> str:
    with pytest.raises(errors.InputValidationError) as info:
        check(body)
    return info.value.message


def input_error(body: object, **kwargs: Any) -> str:
    """An InputError that is *not* a schema error: TaskCluster's semantic checks."""
    with pytest.raises(errors.InputError) as info:
        check(body, **kwargs)
    assert type(info.value) is errors.InputError
    assert info.value.code == "InputError"
    assert info.value.status == 400
    return info.value.message


# the happy path --------------------------------------------------------------------------------


def test_minimal_definition_gets_every_default_in_order() -> None:
    result = check(make_body())
    assert result == {
        "provisionerId": "prov-1",
        "workerType": "worker-a",
        "taskQueueId": "prov-1/worker-a",
        "schedulerId": "-",
        "projectId": "none",
        "taskGroupId": TASK_ID,
        "dependencies": [],
        "requires": "all-completed",
        "routes": [],
        "priority": "lowest",
        "retries": 5,
        "created": "2024-03-01T12:00:00.000Z",
        "deadline": "2024-03-02T12:00:00.000Z",
        "expires": "2025-03-02T12:00:00.000Z",
        "scopes": [],
        "payload": {},
        "metadata": make_body()["metadata"],
        "tags": {},
        "extra": {},
    }
    assert list(result) == list(task_definition.KEYS)


def test_given_values_are_kept() -> None:
    given = {
        "schedulerId": "my-scheduler",
        "projectId": "proj/a.b-c_d",
        "taskGroupId": OTHER_ID,
        "dependencies": [OTHER_ID, TASK_ID],
        "requires": "all-resolved",
        "routes": ["index.a.b", "notify.email.x@y.z.on-failed"],
        "priority": "very-high",
        "retries": 0,
        "expires": iso(30 * dates.DAY),
        "scopes": ["queue:x", "secrets:get:abc*", "with space ~"],
        "payload": {"image": "ubuntu", "command": ["true"]},
        "tags": {"kind": "build", "empty": ""},
        "extra": {"treeherder": {"symbol": "B"}},
    }
    result = check(make_body(**given))
    for key, value in given.items():
        assert result[key] == value, key


def test_defaults_are_fresh_each_time() -> None:
    first = check(make_body())
    first["routes"].append("x")
    first["tags"]["a"] = "b"
    second = check(make_body())
    assert second["routes"] == []
    assert second["tags"] == {}


def test_input_is_not_mutated() -> None:
    body = make_body(created="2024-03-01T12:00:00.123456Z")
    snapshot = repr(body)
    check(body)
    assert repr(body) == snapshot


def test_retries_integral_float_is_stored_as_int() -> None:
    result = check(make_body(retries=3.0))
    assert result["retries"] == 3
    assert type(result["retries"]) is int


# dates: normalisation --------------------------------------------------------------------------


def test_extra_fraction_digits_are_normalised() -> None:
    result = check(
        make_body(
            created="2024-03-01T12:00:00.123456789Z",
            deadline="2024-03-02T12:00:00.1Z",
            expires="2024-03-09T12:00:00Z",
        )
    )
    assert result["created"] == "2024-03-01T12:00:00.123Z"
    assert result["deadline"] == "2024-03-02T12:00:00.100Z"
    assert result["expires"] == "2024-03-09T12:00:00.000Z"


def test_same_instants_written_differently_give_the_same_definition() -> None:
    plain = check(make_body(created="2024-03-01T12:00:00.123Z"))
    fancy = check(make_body(created="2024-03-01T13:00:00.1239+01:00"))
    assert plain == fancy


def test_default_expires_is_one_calendar_year_after_deadline() -> None:
    assert check(make_body(deadline="2024-03-04T01:02:03.456Z"))["expires"] == "2025-03-04T01:02:03.456Z"


def test_default_expires_from_29_february_is_1_march_as_in_javascript() -> None:
    now = dates.parse_iso("2024-02-28T12:00:00.000Z")
    body = make_body(created=dates.to_iso(now), deadline="2024-02-29T06:00:00.000Z")
    result = task_definition.validate(TASK_ID, body, now=now)
    assert result["expires"] == "2025-03-01T06:00:00.000Z"


@pytest.mark.parametrize("field", ["created", "deadline", "expires"])
@pytest.mark.parametrize(
    "value", ["tomorrow", "2024-03-01", "2024-03-01T12:00:00", "2024-13-01T00:00:00Z", 17]
)
def test_unparsable_dates_are_validation_errors_naming_the_field(field: str, value: Any) -> None:
    assert validation_error(make_body(**{field: value})).startswith(f"body.{field} must be ")


# dates: rules ----------------------------------------------------------------------------------


@pytest.mark.parametrize("offset", [-15 * dates.MINUTE, 15 * dates.MINUTE])
def test_created_may_be_15_minutes_off(offset: int) -> None:
    check(make_body(created=iso(offset)))


def test_created_too_far_in_the_past() -> None:
    message = input_error(make_body(created=iso(-15 * dates.MINUTE - 1)))
    assert message.startswith("created must be within 15 minutes of the current time")
    assert message.endswith("in the past")


def test_created_too_far_in_the_future() -> None:
    message = input_error(make_body(created=iso(20 * dates.MINUTE)))
    assert message == "created must be within 15 minutes of the current time; it is 20 minutes in the future"


def test_created_after_deadline() -> None:
    body = make_body(created=iso(10 * dates.MINUTE), deadline=iso(5 * dates.MINUTE))
    assert input_error(body) == "deadline must not be before created; it is 5 minutes earlier"


def test_deadline_equal_to_created_is_fine() -> None:
    check(make_body(created=iso(dates.MINUTE), deadline=iso(dates.MINUTE)))


def test_deadline_in_the_past() -> None:
    body = make_body(created=iso(-10 * dates.MINUTE), deadline=iso(-5 * dates.MINUTE))
    assert input_error(body) == "deadline must not be in the past; it was 5 minutes ago"


def test_deadline_six_days_out() -> None:
    message = input_error(make_body(deadline=iso(6 * dates.DAY)))
    assert message == "deadline must be no more than 5 days (plus 15 minutes) after now; it is 6 days away"


def test_deadline_limit_is_inclusive_and_has_15_minutes_grace() -> None:
    check(make_body(deadline=iso(5 * dates.DAY + 15 * dates.MINUTE)))
    message = input_error(make_body(deadline=iso(5 * dates.DAY + 16 * dates.MINUTE)))
    assert message.endswith("; it is 5 days 16 minutes away")


def test_max_deadline_days_is_configurable() -> None:
    check(make_body(deadline=iso(9 * dates.DAY)), max_deadline_days=10)
    message = input_error(make_body(deadline=iso(2 * dates.DAY)), max_deadline_days=1)
    assert message == "deadline must be no more than 1 day (plus 15 minutes) after now; it is 2 days away"


def test_expires_before_deadline() -> None:
    body = make_body(deadline=iso(dates.DAY), expires=iso(dates.DAY - dates.HOUR))
    assert input_error(body) == "expires must not be before deadline; it is 1 hour earlier"


def test_expires_equal_to_deadline_is_fine() -> None:
    check(make_body(deadline=iso(dates.DAY), expires=iso(dates.DAY)))


RANGE = "must be a date-time from 1970-01-01T00:00:00.000Z to 9998-12-31T23:59:59.999Z"


@pytest.mark.parametrize("deadline", ["0500-01-01T00:00:00Z", "0001-01-01T00:00:00Z"])
def test_ancient_deadline_is_refused_naming_the_field(deadline: str) -> None:
    assert validation_error(make_body(deadline=deadline)) == f"body.deadline {RANGE}"


@pytest.mark.parametrize("field", ["created", "deadline", "expires"])
@pytest.mark.parametrize(
    "value", ["9999-12-31T23:59:59.999Z", "9999-01-01T00:00:00Z", "1969-12-31T23:59:59Z"]
)
def test_dates_out_of_range_are_refused_naming_the_field(field: str, value: str) -> None:
    assert validation_error(make_body(**{field: value})) == f"body.{field} {RANGE}"


def test_the_latest_expiry_is_fine() -> None:
    assert check(make_body(expires="9998-12-31T23:59:59.999Z"))["expires"] == "9998-12-31T23:59:59.999Z"


# queue identity --------------------------------------------------------------------------------


def test_provisioner_id_and_worker_type_alone() -> None:
    result = check(make_body(taskQueueId=None, provisionerId="prov-1", workerType="worker-a"))
    assert result["taskQueueId"] == "prov-1/worker-a"
    assert (result["provisionerId"], result["workerType"]) == ("prov-1", "worker-a")


def test_both_forms_store_the_same_definition() -> None:
    legacy = check(make_body(taskQueueId=None, provisionerId="prov-1", workerType="worker-a"))
    modern = check(make_body())
    both = check(make_body(provisionerId="prov-1", workerType="worker-a"))
    assert legacy == modern == both


@pytest.mark.parametrize(
    "identity",
    [
        {"provisionerId": "prov-2", "workerType": "worker-a"},
        {"provisionerId": "prov-1", "workerType": "worker-b"},
        {"provisionerId": "prov-2"},
        {"workerType": "worker-b"},
    ],
)
def test_identity_mismatch_is_an_input_error(identity: dict[str, str]) -> None:
    message = input_error(make_body(**identity))
    assert message.startswith("taskQueueId must equal provisionerId/workerType")
    assert "'prov-1/worker-a'" in message


def test_task_queue_id_with_one_matching_part_is_fine() -> None:
    assert check(make_body(provisionerId="prov-1"))["workerType"] == "worker-a"


@pytest.mark.parametrize(
    "identity",
    [{}, {"provisionerId": "prov-1"}, {"workerType": "worker-a"}],
)
def test_no_queue_identity_is_an_input_error(identity: dict[str, str]) -> None:
    message = input_error(make_body(taskQueueId=None, **identity))
    assert "taskQueueId" in message
    assert "provisionerId and workerType" in message


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("provisionerId", "has.dot"),
        ("provisionerId", ""),
        ("provisionerId", "p" * 39),
        ("workerType", "Upper"),
        ("workerType", "ends-with-"),
        ("workerType", "1starts-with-digit"),
        ("workerType", "w" * 39),
        ("taskQueueId", "no-slash"),
        ("taskQueueId", "a/b/c"),
        ("taskQueueId", "prov/Worker"),
        ("taskQueueId", "/worker"),
    ],
)
def test_identity_patterns(field: str, value: str) -> None:
    assert validation_error(make_body(**{field: value})).startswith(f"body.{field} must match ^")


def test_identity_limits_accepted() -> None:
    body = make_body(taskQueueId="p" * 38 + "/w" + "-" * 36 + "9")
    assert check(body)["provisionerId"] == "p" * 38


# priority --------------------------------------------------------------------------------------


@pytest.mark.parametrize("priority", task_definition.PRIORITIES)
def test_every_priority_is_accepted(priority: str) -> None:
    assert check(make_body(priority=priority))["priority"] == priority


def test_normal_priority_is_refused_by_the_schema() -> None:
    assert (
        validation_error(make_body(priority="normal")) == f"body.priority must be one of: {PRIORITY_CHOICES}"
    )


def test_priority_rank() -> None:
    assert task_definition.PRIORITIES[0] == "highest"
    assert [task_definition.priority_rank(p) for p in task_definition.PRIORITIES] == [7, 6, 5, 4, 3, 2, 1]
    with pytest.raises(errors.InputValidationError):
        task_definition.priority_rank("normal")


# the rest of the schema ------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["created", "deadline", "payload", "metadata"])
def test_required_fields(field: str) -> None:
    assert validation_error(make_body(**{field: None})) == f"body.{field} is required"


def test_unknown_property_is_refused() -> None:
    assert (
        validation_error(make_body(workerGroup="x")) == "body.workerGroup is not allowed (unknown property)"
    )


@pytest.mark.parametrize("body", [None, [], "task", 3, True])
def test_body_must_be_an_object(body: object) -> None:
    assert validation_error(body).startswith("body must be an object, not ")


@pytest.mark.parametrize("field", ["name", "description", "owner", "source"])
def test_metadata_fields_are_required(field: str) -> None:
    metadata = make_body()["metadata"]
    del metadata[field]
    assert validation_error(make_body(metadata=metadata)) == f"body.metadata.{field} is required"


@pytest.mark.parametrize(
    ("field", "limit"), [("name", 255), ("description", 32768), ("owner", 255), ("source", 4096)]
)
def test_metadata_lengths(field: str, limit: int) -> None:
    metadata = make_body()["metadata"]
    prefix = "https://" if field == "source" else ""
    metadata[field] = prefix + "x" * (limit - len(prefix))
    check(make_body(metadata=metadata))
    metadata[field] += "x"
    message = validation_error(make_body(metadata=metadata))
    assert message == f"body.metadata.{field} must be at most {limit} characters; it has {limit + 1}"


@pytest.mark.parametrize(
    "source", ["https://x", "http://x", "ssh://hg.example.com/repo", "git@github.com:a/b"]
)
def test_metadata_sources_accepted(source: str) -> None:
    metadata = {**make_body()["metadata"], "source": source}
    assert check(make_body(metadata=metadata))["metadata"]["source"] == source


@pytest.mark.parametrize("source", ["ftp://x", "github.com/a/b", "", " https://x"])
def test_metadata_sources_refused(source: str) -> None:
    metadata = {**make_body()["metadata"], "source": source}
    assert validation_error(make_body(metadata=metadata)) == (
        "body.metadata.source must match ^(https?://|ssh://|git@)"
    )


def test_metadata_unknown_property() -> None:
    metadata = {**make_body()["metadata"], "url": "x"}
    assert validation_error(make_body(metadata=metadata)) == (
        "body.metadata.url is not allowed (unknown property)"
    )


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [
        ("schedulerId", "", "must be at least 1 character"),
        ("schedulerId", "s" * 39, "must be at most 38 characters"),
        ("schedulerId", "a.b", "must match ^([a-zA-Z0-9-_]*)$"),
        ("projectId", "", "must be at least 1 character"),
        ("projectId", "p" * 501, "must be at most 500 characters"),
        ("projectId", "a:b", "must match ^([a-zA-Z0-9._/-]*)$"),
        ("taskGroupId", "not-a-slugid", f"must match {slugid.PATTERN.pattern}"),
        ("requires", "any", "must be one of: all-completed, all-resolved"),
        ("retries", -1, "must be at least 0"),
        ("retries", 50, "must be at most 49"),
        ("retries", True, "must be an integer, not a boolean"),
        ("retries", "5", "must be an integer, not a string"),
        ("retries", 1.5, "must be an integer, not a number"),
        ("payload", [], "must be an object, not an array"),
        ("extra", "x", "must be an object, not a string"),
        ("tags", [], "must be an object, not an array"),
        ("dependencies", OTHER_ID, "must be an array, not a string"),
        ("routes", {}, "must be an array, not an object"),
        ("scopes", "queue:x", "must be an array, not a string"),
    ],
)
def test_field_rules(field: str, value: Any, rule: str) -> None:
    assert validation_error(make_body(**{field: value})).startswith(f"body.{field} {rule}")


def test_limits_accepted() -> None:
    check(make_body(schedulerId="s" * 38, projectId="p" * 500, retries=49))


def test_dependencies() -> None:
    many = [slugid.nice() for _ in range(task_definition.MAX_DEPENDENCIES)]
    assert check(make_body(dependencies=many))["dependencies"] == many
    assert check(make_body(dependencies=[TASK_ID]))["dependencies"] == [TASK_ID]  # self-dependency allowed
    too_many = [*many, slugid.nice()]
    message = validation_error(make_body(dependencies=too_many))
    assert message == "body.dependencies must have at most 10000 items; it has 10001"
    message = validation_error(make_body(dependencies=[OTHER_ID, TASK_ID, OTHER_ID]))
    assert message == "body.dependencies must not contain duplicates; items 0 and 2 are equal"
    message = validation_error(make_body(dependencies=[OTHER_ID, "nope"]))
    assert message.startswith("body.dependencies[1] must match ^")


def test_routes() -> None:
    routes = [f"r.{i}" for i in range(64)]
    assert check(make_body(routes=routes))["routes"] == routes
    message = validation_error(make_body(routes=[*routes, "r.64"]))
    assert message == "body.routes must have at most 64 items; it has 65"
    assert validation_error(make_body(routes=["a", "a"])).startswith(
        "body.routes must not contain duplicates"
    )
    assert validation_error(make_body(routes=["a", ""])).startswith(
        "body.routes[1] must be at least 1 character"
    )
    check(make_body(routes=["x" * 249]))
    assert validation_error(make_body(routes=["x" * 250])).startswith("body.routes[0] must be at most 249")
    assert validation_error(make_body(routes=[1])) == "body.routes[0] must be a string, not an integer"


def test_tags() -> None:
    check(make_body(tags={"a": "x" * 4096}))
    message = validation_error(make_body(tags={"a": "x" * 4097}))
    assert message == "body.tags.a must be at most 4096 characters; it has 4097"
    assert validation_error(make_body(tags={"n": 1})) == "body.tags.n must be a string, not an integer"
    assert validation_error(make_body(tags={"n": None})) == "body.tags.n must be a string, not null"


def test_scopes_duplicates_allowed_and_printable_ascii_only() -> None:
    assert check(make_body(scopes=["a", "a", ""]))["scopes"] == ["a", "a", ""]
    message = validation_error(make_body(scopes=["ok", "tab\there"]))
    assert message == "body.scopes[1] must match ^[\\x20-\\x7e]*$"
    assert validation_error(make_body(scopes=["é"])).startswith("body.scopes[0] must match")


def test_scope_ending_in_double_star_is_an_input_error() -> None:
    check(make_body(scopes=["abc:*", "a*b*"]))
    message = input_error(make_body(scopes=["abc:*", "abc:**"]))
    assert message.startswith("scopes[1] must not end with '**'")


# order of the checks ---------------------------------------------------------------------------


def test_schema_is_checked_before_identity() -> None:
    body = make_body(provisionerId="other", priority="normal")
    assert validation_error(body).startswith("body.priority")


def test_identity_is_checked_before_dates() -> None:
    body = make_body(taskQueueId=None, deadline=iso(30 * dates.DAY))
    assert "taskQueueId" in input_error(body)


def test_dates_are_checked_before_scopes() -> None:
    body = make_body(deadline=iso(30 * dates.DAY), scopes=["a:**"])
    assert input_error(body).startswith("deadline")


# with_defaults ---------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [None, [1], "x", 5])
def test_with_defaults_leaves_non_objects_alone(body: object) -> None:
    assert task_definition.with_defaults(TASK_ID, body) is body


def test_with_defaults_fills_without_validating() -> None:
    body = {"priority": "normal", "deadline": "2024-03-02T12:00:00Z", "bogus": 1}
    filled = task_definition.with_defaults(TASK_ID, body)
    assert isinstance(filled, dict)
    assert filled["priority"] == "normal"
    assert filled["bogus"] == 1
    assert filled["schedulerId"] == "-"
    assert filled["projectId"] == "none"
    assert filled["taskGroupId"] == TASK_ID
    assert filled["retries"] == 5
    assert filled["expires"] == "2025-03-02T12:00:00.000Z"
    assert body == {"priority": "normal", "deadline": "2024-03-02T12:00:00Z", "bogus": 1}


@pytest.mark.parametrize("deadline", [None, 5, "soon", "9998-06-30T12:00:00Z", "9999-12-31T12:00:00Z"])
def test_with_defaults_tolerates_any_deadline(deadline: object) -> None:
    filled = task_definition.with_defaults(TASK_ID, {"deadline": deadline})
    assert isinstance(filled, dict)
    if deadline == "9998-06-30T12:00:00Z":  # a year later is past the latest date: that, then
        assert filled["expires"] == "9998-12-31T23:59:59.999Z"
    else:
        assert "expires" not in filled


# robustness ------------------------------------------------------------------------------------


def mutate(rng: random.Random, body: dict[str, Any]) -> dict[str, Any]:
    garbage: list[Any] = [None, True, 0, -1, 10**5000, 1.5, "", "x" * 5000, [], {}, [None], {"a": []}]
    garbage += ["0500-01-01T00:00:00Z", "9999-12-31T23:59:59Z", iso(dates.HOUR), "a/b", "a:**", "lowest"]
    keys = [*task_definition.KEYS, "metadata", "bogus"]
    for _ in range(rng.randrange(1, 4)):
        body[rng.choice(keys)] = rng.choice(garbage)
    return body


@pytest.mark.parametrize("seed", range(10))
def test_garbage_only_ever_raises_input_errors(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(300):
        try:
            check(mutate(rng, make_body()))
        except errors.InputError as exc:
            assert exc.status == 400

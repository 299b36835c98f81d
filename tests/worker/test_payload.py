from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest

from taskyard.model import dates
from taskyard.worker import jsonschema, payload
from taskyard.worker.payload import ArtifactSpec, MalformedPayload, Payload

TASK_ID = "fN1SbArXTPSVFNUvaOlinQ"
DEADLINE = dates.parse_iso("2024-03-01T13:00:00.000Z")
EXPIRES = dates.parse_iso("2025-03-01T12:00:00.000Z")
E = "[taskcluster:error] "


def body(**changes: Any) -> dict[str, Any]:
    """A valid payload, with `changes` applied (None removes a key)."""
    found: dict[str, Any] = {"command": [["echo", "hello"]], "maxRunTime": 30}
    for key, value in changes.items():
        if value is None:
            found.pop(key, None)
        else:
            found[key] = value
    return found


def parse(value: object, **kwargs: Any) -> Payload:
    return payload.parse(value, task_id=TASK_ID, deadline=DEADLINE, expires=EXPIRES, **kwargs)


def malformed(value: object, **kwargs: Any) -> MalformedPayload:
    with pytest.raises(MalformedPayload) as info:
        parse(value, **kwargs)
    return info.value


def schema_errors(value: object) -> list[str]:
    """The `- field: problem` lines of a schema failure, without their prefix."""
    lines = malformed(value).lines
    assert lines[0] == E + "TASK FAIL since the task payload is invalid. See errors:"
    end = lines.index(E + f"validation of payload failed for task {TASK_ID}")
    return [line.removeprefix(E) for line in lines[1:end]]


def messages(value: object, **kwargs: Any) -> list[str]:
    """The lines of a non-schema failure, without their prefix."""
    lines = malformed(value, **kwargs).lines
    assert all(line.startswith(E) for line in lines)
    return [line.removeprefix(E) for line in lines]


def artifact(**fields: Any) -> dict[str, Any]:
    return {"type": "file", "path": "public/out.txt", **fields}


def iso(ms: int) -> str:
    return dates.to_iso(ms)


# Valid payloads -------------------------------------------------------------------------------


def test_minimal_payload_gets_every_default() -> None:
    assert parse(body()) == Payload(
        command=[["echo", "hello"]],
        env={},
        max_run_time=30,
        artifacts=[],
        retry_exit_codes=frozenset(),
        live_log="public/logs/live.log",
        backing_log="public/logs/live_backing.log",
        live_log_enabled=True,
    )


def test_full_payload_is_read_field_by_field() -> None:
    parsed = parse(
        body(
            command=[["sh", "-c", "exit 36"], ["true"]],
            env={"FOO": "bar", "EMPTY": ""},
            maxRunTime=300,
            onExitStatus={"retry": [36, 1], "purgeCaches": [0, 2]},
            features={"liveLog": False, "backingLog": True, "taskclusterProxy": False},
            logs={"live": "public/logs/custom_live.log", "backing": "public/logs/custom.log"},
            supersederUrl="https://example.com/superseder",
            mounts=[],
            osGroups=[],
        )
    )
    assert parsed.command == [["sh", "-c", "exit 36"], ["true"]]
    assert parsed.env == {"FOO": "bar", "EMPTY": ""}
    assert parsed.max_run_time == 300
    assert parsed.retry_exit_codes == frozenset({1, 36})
    assert parsed.live_log == "public/logs/custom_live.log"
    assert parsed.backing_log == "public/logs/custom.log"
    assert parsed.live_log_enabled is False


def test_artifact_defaults_are_filled_in() -> None:
    parsed = parse(body(artifacts=[artifact()]))
    assert parsed.artifacts == [
        ArtifactSpec(
            type="file",
            path="public/out.txt",
            name="public/out.txt",
            expires=EXPIRES,
            content_type=None,
            content_encoding=None,
            optional=False,
        )
    ]


def test_artifact_fields_are_read() -> None:
    entry = {
        "type": "directory",
        "path": "build/dist",
        "name": "public/dist",
        "expires": iso(DEADLINE + dates.HOUR),
        "contentType": "text/html",
        "contentEncoding": "identity",
        "optional": True,
    }
    [spec] = parse(body(artifacts=[entry])).artifacts
    assert spec == ArtifactSpec(
        "directory", "build/dist", "public/dist", DEADLINE + dates.HOUR, "text/html", "identity", True
    )


def test_default_name_uses_forward_slashes() -> None:
    [spec] = parse(body(artifacts=[artifact(path="public\\logs\\x.txt")])).artifacts
    assert spec.path == "public\\logs\\x.txt"
    assert spec.name == "public/logs/x.txt"


def test_integral_float_is_an_integer() -> None:
    parsed = parse(body(maxRunTime=5.0))
    assert parsed.max_run_time == 5
    assert isinstance(parsed.max_run_time, int)


def test_max_run_time_at_the_limit_is_fine() -> None:
    assert parse(body(maxRunTime=300), max_run_time_limit=300).max_run_time == 300
    assert parse(body(maxRunTime=86400)).max_run_time == 86400


@pytest.mark.parametrize("feature", payload.KNOWN_FEATURES)
def test_every_known_feature_may_be_turned_off(feature: str) -> None:
    parse(body(features={feature: False}))


@pytest.mark.parametrize("feature", ["liveLog", "backingLog", "taskclusterProxy"])
def test_supported_features_may_be_turned_on(feature: str) -> None:
    parse(body(features={feature: True}))


def test_the_proxy_is_off_unless_asked_for() -> None:
    assert not parse(body()).taskcluster_proxy
    assert parse(body(features={"taskclusterProxy": True})).taskcluster_proxy


def test_same_file_listed_twice_with_different_expiry_is_fine() -> None:
    entries = [artifact(), artifact(expires=iso(DEADLINE))]
    assert [spec.expires for spec in parse(body(artifacts=entries)).artifacts] == [EXPIRES, DEADLINE]


def test_parsed_payload_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        parse(body()).max_run_time = 5  # type: ignore[misc]


# Schema failures: the exact log, as generic-worker writes it -----------------------------------


def test_empty_payload_prints_every_error_then_the_schema() -> None:
    error = malformed({})
    schema_lines = [E + line for line in json.dumps(payload.SCHEMA, indent=2).splitlines()]
    assert error.lines == [
        E + "TASK FAIL since the task payload is invalid. See errors:",
        E + "- (root): command is required",
        E + "- (root): maxRunTime is required",
        E + f"validation of payload failed for task {TASK_ID}",
        E + "Task payload for this worker type must conform to the following jsonschema:",
        *schema_lines,
    ]
    assert error.summary == "task payload is invalid: (root): command is required (and 1 more)"
    assert str(error) == error.summary


def test_single_error_summary_has_no_count() -> None:
    assert (
        malformed(body(maxRunTime=None)).summary == "task payload is invalid: (root): maxRunTime is required"
    )


@pytest.mark.parametrize(
    ("value", "given"),
    [([], "array"), ("echo", "string"), (None, "null"), (5, "integer"), (1.5, "number"), (True, "boolean")],
)
def test_payload_that_is_not_an_object(value: object, given: str) -> None:
    assert schema_errors(value) == [f"- (root): Invalid type. Expected: object, given: {given}"]


@pytest.mark.parametrize("key", ["foo", "image", "capabilities"])
def test_extra_top_level_key(key: str) -> None:
    assert schema_errors(body(**{key: 1})) == [f"- (root): Additional property {key} is not allowed"]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"artifacts": [artifact(extra=1)]}, "- artifacts.0: Additional property extra is not allowed"),
        ({"onExitStatus": {"retry": [], "x": []}}, "- onExitStatus: Additional property x is not allowed"),
        ({"features": {"dockerSocket": True}}, "- features: Additional property dockerSocket is not allowed"),
        ({"logs": {"all": "x"}}, "- logs: Additional property all is not allowed"),
    ],
)
def test_extra_nested_keys(changes: dict[str, Any], expected: str) -> None:
    assert schema_errors(body(**changes)) == [expected]


def test_non_string_env_values() -> None:
    env = {"FOO": 1, "BAR": "ok", "BAZ": True, "QUX": None}
    assert schema_errors(body(env=env)) == [
        "- env.FOO: Invalid type. Expected: string, given: integer",
        "- env.BAZ: Invalid type. Expected: string, given: boolean",
        "- env.QUX: Invalid type. Expected: string, given: null",
    ]


def test_env_must_be_an_object() -> None:
    assert schema_errors(body(env=["FOO=1"])) == ["- env: Invalid type. Expected: object, given: array"]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (None, "- (root): command is required"),
        ([], "- command: Array must have at least 1 items"),
        ([[]], "- command.0: Array must have at least 1 items"),
        ([["true"], []], "- command.1: Array must have at least 1 items"),
        (["echo hello"], "- command.0: Invalid type. Expected: array, given: string"),
        ([["echo", 1]], "- command.0.1: Invalid type. Expected: string, given: integer"),
        ("echo hello", "- command: Invalid type. Expected: array, given: string"),
    ],
)
def test_bad_commands(command: Any, expected: str) -> None:
    assert schema_errors(body(command=command)) == [expected]


@pytest.mark.parametrize("code", [0, -1])
def test_retry_exit_code_below_one(code: int) -> None:
    assert schema_errors(body(onExitStatus={"retry": [code]})) == [
        "- onExitStatus.retry.0: Must be greater than or equal to 1"
    ]


def test_retry_exit_codes_are_checked_one_by_one() -> None:
    assert schema_errors(body(onExitStatus={"retry": [3, 0, "1"]})) == [
        "- onExitStatus.retry.1: Must be greater than or equal to 1",
        "- onExitStatus.retry.2: Invalid type. Expected: integer, given: string",
    ]


def test_retry_exit_codes_must_be_unique() -> None:
    assert schema_errors(body(onExitStatus={"retry": [2, 3, 2]})) == [
        "- onExitStatus.retry: array items[0,2] must be unique"
    ]


def test_purge_caches_accepts_zero_but_not_below() -> None:
    parse(body(onExitStatus={"purgeCaches": [0]}))
    assert schema_errors(body(onExitStatus={"purgeCaches": [-1]})) == [
        "- onExitStatus.purgeCaches.0: Must be greater than or equal to 0"
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, "- maxRunTime: Must be greater than or equal to 1"),
        (-5, "- maxRunTime: Must be greater than or equal to 1"),
        (1.5, "- maxRunTime: Invalid type. Expected: integer, given: number"),
        ("30", "- maxRunTime: Invalid type. Expected: integer, given: string"),
        (True, "- maxRunTime: Invalid type. Expected: integer, given: boolean"),
    ],
)
def test_bad_max_run_time(value: object, expected: str) -> None:
    assert schema_errors(body(maxRunTime=value)) == [expected]


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"path": "a"}, "- artifacts.0: type is required"),
        ({"type": "file"}, "- artifacts.0: path is required"),
        (
            artifact(type="link"),
            '- artifacts.0.type: artifacts.0.type must be one of the following: "file", "directory"',
        ),
        (
            artifact(contentEncoding="br"),
            "- artifacts.0.contentEncoding: artifacts.0.contentEncoding must be one of the following: "
            '"identity", "gzip"',
        ),
        (artifact(expires="tomorrow"), "- artifacts.0.expires: Does not match format 'date-time'"),
        (artifact(expires="2024-03-01T13:00:00"), "- artifacts.0.expires: Does not match format 'date-time'"),
        (artifact(optional="yes"), "- artifacts.0.optional: Invalid type. Expected: boolean, given: string"),
        (artifact(name=5), "- artifacts.0.name: Invalid type. Expected: string, given: integer"),
        ("public/x", "- artifacts.0: Invalid type. Expected: object, given: string"),
    ],
)
def test_bad_artifact_entries(entry: Any, expected: str) -> None:
    assert schema_errors(body(artifacts=[entry])) == [expected]


def test_identical_artifact_listed_twice() -> None:
    entries = [artifact(), artifact(path="other.txt"), artifact()]
    assert schema_errors(body(artifacts=entries)) == ["- artifacts: array items[0,2] must be unique"]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"features": {"liveLog": "yes"}},
            "- features.liveLog: Invalid type. Expected: boolean, given: string",
        ),
        ({"logs": {"live": 5}}, "- logs.live: Invalid type. Expected: string, given: integer"),
        ({"supersederUrl": 5}, "- supersederUrl: Invalid type. Expected: string, given: integer"),
        ({"mounts": {}}, "- mounts: Invalid type. Expected: array, given: object"),
        ({"osGroups": [1]}, "- osGroups.0: Invalid type. Expected: string, given: integer"),
        ({"onExitStatus": []}, "- onExitStatus: Invalid type. Expected: object, given: array"),
    ],
)
def test_other_type_errors(changes: dict[str, Any], expected: str) -> None:
    assert schema_errors(body(**changes)) == [expected]


def test_all_schema_errors_are_listed() -> None:
    value = {"command": [[]], "env": {"A": 1}, "maxRunTime": 0, "onExitStatus": {"retry": [-1]}, "x": 1}
    assert schema_errors(value) == [
        "- command.0: Array must have at least 1 items",
        "- env.A: Invalid type. Expected: string, given: integer",
        "- maxRunTime: Must be greater than or equal to 1",
        "- onExitStatus.retry.0: Must be greater than or equal to 1",
        "- (root): Additional property x is not allowed",
    ]


def test_schema_failure_skips_the_other_rules() -> None:
    # An over-long maxRunTime would be refused too, but only once the schema is satisfied.
    assert schema_errors(body(maxRunTime=999999, env={"A": 1})) == [
        "- env.A: Invalid type. Expected: string, given: integer"
    ]


# Rules beyond the schema ----------------------------------------------------------------------


def test_max_run_time_above_the_limit() -> None:
    error = malformed(body(maxRunTime=310), max_run_time_limit=300)
    assert error.lines == [E + "task's maxRunTime of 310 exceeded allowed maximum of 300"]
    assert error.summary == "task's maxRunTime of 310 exceeded allowed maximum of 300"


def test_default_max_run_time_limit() -> None:
    assert payload.DEFAULT_MAX_RUN_TIME_LIMIT == 86400
    assert messages(body(maxRunTime=86401)) == [
        "task's maxRunTime of 86401 exceeded allowed maximum of 86400"
    ]


@pytest.mark.parametrize("offset", [0, -dates.SECOND, dates.SECOND], ids=["at", "1s-before", "1s-after"])
def test_artifact_expiring_at_the_deadline_is_fine(offset: int) -> None:
    [spec] = parse(body(artifacts=[artifact(expires=iso(DEADLINE + offset))])).artifacts
    assert spec.expires == DEADLINE + offset


@pytest.mark.parametrize("offset", [0, -dates.SECOND, dates.SECOND], ids=["at", "1s-before", "1s-after"])
def test_artifact_expiring_at_the_task_expiry_is_fine(offset: int) -> None:
    parse(body(artifacts=[artifact(expires=iso(EXPIRES + offset))]))


def test_artifact_expiring_before_the_deadline() -> None:
    expires = DEADLINE - 2 * dates.SECOND
    assert messages(body(artifacts=[artifact(expires=iso(expires))])) == [
        "malformed payload: artifact 'public/out.txt' expires before task deadline "
        "(2024-03-01T12:59:58.000Z is before 2024-03-01T13:00:00.000Z)"
    ]


def test_artifact_expiring_after_the_task() -> None:
    expires = EXPIRES + 2 * dates.SECOND
    assert messages(body(artifacts=[artifact(expires=iso(expires))])) == [
        "malformed payload: artifact 'public/out.txt' expires after task expiry "
        "(2025-03-01T12:00:02.000Z is after 2025-03-01T12:00:00.000Z)"
    ]


def test_artifact_expiry_in_another_timezone_is_compared_as_an_instant() -> None:
    parse(body(artifacts=[artifact(expires="2024-03-01T14:00:00+01:00")]))  # exactly the deadline
    assert messages(body(artifacts=[artifact(expires="2024-03-01T13:59:58+01:00")]))[0].startswith(
        "malformed payload: artifact 'public/out.txt' expires before task deadline"
    )


@pytest.mark.parametrize("feature", sorted(set(payload.KNOWN_FEATURES) - set(payload.SUPPORTED_FEATURES)))
def test_unsupported_feature_turned_on(feature: str) -> None:
    assert messages(body(features={feature: True}), task_queue_id="proj/linux") == [
        f'this task is attempting to use feature "{feature}", '
        "but it's not enabled on this worker pool (proj/linux)"
    ]


def test_os_groups_are_not_supported_yet() -> None:
    value = body(mounts=[{"directory": "cache", "cacheName": "c"}], osGroups=["docker"])
    assert messages(value) == [
        "this task uses payload.osGroups, which taskyard's worker doesn't support yet",
    ]


def test_mounts_are_read_into_the_payload() -> None:
    parsed = parse(body(mounts=[{"directory": "cache", "cacheName": "c"}], onExitStatus={"purgeCaches": [3]}))
    assert [(m.kind, m.path, m.cache_name) for m in parsed.mounts] == [("cache", "cache", "c")]
    assert parsed.purge_caches_exit_codes == frozenset({3})


def test_mount_problems_name_the_mount_and_the_rule() -> None:
    value = body(
        mounts=[{"directory": "../out", "content": {"url": "file:///etc/passwd"}, "format": "tar.zst"}]
    )
    assert messages(value) == [
        "malformed payload: mounts.0.directory must stay inside the task directory: no '..'",
        "malformed payload: mounts.0.format: tar.zst is not supported by taskyard's worker "
        "(it unpacks tar, tar.gz, tar.bz2, tar.xz, zip)",
        "malformed payload: mounts.0.content.url must be an http:// or https:// URL",
    ]


def test_same_name_different_files() -> None:
    entries = [
        artifact(path="a.txt", name="public/x.txt"),
        artifact(path="ok.txt"),
        artifact(path="b.txt", name="public/x.txt"),
    ]
    assert messages(body(artifacts=entries)) == [
        "malformed payload: artifacts.0 (path 'a.txt') and artifacts.2 (path 'b.txt') are both named "
        "'public/x.txt'; artifact names must be unique"
    ]


def test_explicit_name_clashing_with_a_default_name() -> None:
    entries = [artifact(path="public/x.txt"), artifact(path="build/x.txt", name="public/x.txt")]
    assert messages(body(artifacts=entries))[0].endswith(
        "are both named 'public/x.txt'; artifact names must be unique"
    )


def test_same_file_and_name_with_a_different_content_type() -> None:
    entries = [artifact(), artifact(contentType="text/html")]
    assert len(messages(body(artifacts=entries))) == 1


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            artifact(name="public/../secret"),
            "malformed payload: artifacts.0.name may not contain a `..` path segment",
        ),
        (
            artifact(name="public/caf\u00e9.txt"),
            "malformed payload: artifacts.0.name must match ^[\\x20-\\x7e]+$ and be at most 1024 characters",
        ),
        (
            artifact(name="x" * 1025),
            "malformed payload: artifacts.0.name must match ^[\\x20-\\x7e]+$ and be at most 1024 characters",
        ),
        (
            artifact(name="public/./x"),
            "malformed payload: artifacts.0.name may not contain a `.` path segment",
        ),
        (
            artifact(name="public//x"),
            "malformed payload: artifacts.0.name may not contain an empty path segment "
            "(a leading, trailing or doubled `/`)",
        ),
        (
            artifact(name="public/x/"),
            "malformed payload: artifacts.0.name may not contain an empty path segment "
            "(a leading, trailing or doubled `/`)",
        ),
        (
            artifact(type="directory", name="public//"),
            "malformed payload: artifacts.0.name may not contain an empty path segment "
            "(a leading, trailing or doubled `/`)",
        ),
    ],
)
def test_bad_artifact_names(entry: dict[str, Any], expected: str) -> None:
    assert messages(body(artifacts=[entry])) == [expected]


def test_a_directory_name_may_end_in_one_slash() -> None:
    """Its files are named `<name>/<path>` with that `/` dropped: `public/dist/` names no empty segment."""
    parsed = parse(body(artifacts=[artifact(type="directory", path="dist", name="public/dist/")]))
    assert [spec.name for spec in parsed.artifacts] == ["public/dist/"]


@pytest.mark.parametrize("path", ["/etc/passwd", "../outside", "build/../../outside", "..\\outside"])
def test_artifact_paths_stay_inside_the_task_directory(path: str) -> None:
    found = messages(body(artifacts=[artifact(path=path, name="public/x")]))
    assert found == [
        "malformed payload: artifacts.0.path must be a relative path inside the task directory, without '..'"
    ]


@pytest.mark.parametrize("name", ["public/logs/live.log", "public/logs/live_backing.log"])
def test_artifact_may_not_take_a_log_name(name: str) -> None:
    which = "live log" if name.endswith("live.log") else "backing log"
    assert messages(body(artifacts=[artifact(name=name)])) == [
        f"malformed payload: artifacts.0 is named '{name}', which the {which} uses"
    ]


def test_live_log_name_is_free_when_the_live_log_is_off() -> None:
    parse(body(features={"liveLog": False}, artifacts=[artifact(name="public/logs/live.log")]))


def test_log_names_must_differ() -> None:
    logs = {"live": "public/log.txt", "backing": "public/log.txt"}
    assert messages(body(logs=logs)) == [
        "malformed payload: logs.live and logs.backing must name different artifacts"
    ]
    parse(body(logs=logs, features={"liveLog": False}))


def test_log_names_are_artifact_names() -> None:
    assert messages(body(logs={"backing": "public/../log"})) == [
        "malformed payload: logs.backing may not contain a `..` path segment"
    ]


def test_every_rule_is_reported_and_the_first_is_the_summary() -> None:
    value = body(maxRunTime=500, features={"interactive": True}, artifacts=[artifact(name="a/../b")])
    error = malformed(value, max_run_time_limit=300, task_queue_id="p/w")
    assert [line.removeprefix(E) for line in error.lines] == [
        'this task is attempting to use feature "interactive", '
        "but it's not enabled on this worker pool (p/w)",
        "task's maxRunTime of 500 exceeded allowed maximum of 300",
        "malformed payload: artifacts.0.name may not contain a `..` path segment",
    ]
    assert error.summary == error.lines[0].removeprefix(E)


# The schema itself ------------------------------------------------------------------------------


def keywords(rule: Any) -> Iterator[str]:
    """Every keyword used anywhere in a schema."""
    for key, value in rule.items():
        yield key
        if key == "properties":
            for sub in value.values():
                yield from keywords(sub)
        elif isinstance(value, dict):
            yield from keywords(value)


def test_schema_uses_only_keywords_the_checker_understands() -> None:
    assert set(keywords(payload.SCHEMA)) <= jsonschema.UNDERSTOOD


def test_schema_is_plain_json() -> None:
    assert json.loads(json.dumps(payload.SCHEMA)) == payload.SCHEMA
    assert "writableDirectoryCache" not in json.dumps(payload.SCHEMA)


def test_schema_names_every_known_feature() -> None:
    assert set(payload.SCHEMA["properties"]["features"]["properties"]) == set(payload.KNOWN_FEATURES)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"command": [["true"], ["echo", "a\0b"]]}, "malformed payload: command.1 contains a NUL character"),
        (
            {"env": {"A=B": "x"}},
            "malformed payload: env \"A=B\" needs a name without '=' and no NUL characters",
        ),
        ({"env": {"": "x"}}, "malformed payload: env \"\" needs a name without '=' and no NUL characters"),
        (
            {"env": {"A": "x\0"}},
            "malformed payload: env \"A\" needs a name without '=' and no NUL characters",
        ),
    ],
)
def test_strings_posix_cannot_pass_to_a_command(changes: dict[str, Any], expected: str) -> None:
    assert messages(body(**changes)) == [expected]

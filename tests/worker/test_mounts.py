"""Mount entries as the payload gives them, the rules a task definition must meet, and the cache pool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from taskyard.worker.mounts import Caches, Content, Mount, parse, requirement_problems

TASK = "aaaaaaaaTaaaaaaaaaaaaA"


def problems(*entries: Any) -> list[str]:
    return [p.removeprefix("malformed payload: ") for p in parse(list(entries))[1]]


def test_each_kind_is_told_by_its_keys() -> None:
    found, said = parse(
        [
            {"cacheName": "c", "directory": "cache"},
            {"directory": "d", "content": {"url": "https://example.com/a.zip"}, "format": "zip"},
            {"file": "f", "content": {"taskId": TASK, "artifact": "public/f.gz"}, "format": "gz"},
            {"file": "r", "content": {"base64": "aGk="}},
            {"file": "i", "content": {"namespace": "proj.latest", "artifact": "public/i"}},
        ]
    )
    assert said == []
    assert [m.kind for m in found] == ["cache", "directory", "file", "file", "file"]
    assert found[4].content == Content("namespace", namespace="proj.latest", artifact="public/i")
    assert found[2].content == Content("taskId", task_id=TASK, artifact="public/f.gz")
    assert found[3].content == Content("base64", inline=b"hi")


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        (
            {"volume": "x"},
            "mounts.0 must have cacheName and directory (a cache), directory (a directory) or file",
        ),
        ({"cacheName": "c"}, "mounts.0.directory is required in a cache mount"),
        (
            {"cacheName": "c", "directory": "c", "format": "zip"},
            "mounts.0: a cache's content and format go together",
        ),
        ({"directory": "d", "content": {"raw": "x"}}, "mounts.0.format is required in a directory mount"),
        ({"file": "f", "content": {"raw": "x"}, "format": "zst"}, "mounts.0.format: zst is not supported"),
        (
            {"file": "f", "content": {"raw": "x"}, "format": "tar"},
            "mounts.0.format must be one of: gz, bz2, xz",
        ),
        (
            {"file": "f", "content": {"url": "ftp://x"}},
            "mounts.0.content.url must be an http:// or https:// URL",
        ),
        (
            {"file": "f", "content": {"url": "https://x", "sha256": "AB"}},
            "mounts.0.content.sha256 must be 64",
        ),
        ({"file": "f", "content": {"base64": "@@"}}, "mounts.0.content.base64 is not valid base64"),
        ({"file": "f", "content": {"raw": "x" * 65537}}, "mounts.0.content.raw must be at most 65536"),
        (
            {"file": "f", "content": {"namespace": "a.b"}},
            "mounts.0.content.artifact is required with namespace",
        ),
        ({"file": "f", "content": {"taskId": TASK}}, "mounts.0.content.artifact is required with taskId"),
        ({"file": "/etc/f", "content": {"raw": "x"}}, "mounts.0.file must be relative to the task directory"),
        ({"file": "a/../../f", "content": {"raw": "x"}}, "mounts.0.file must stay inside the task directory"),
        ({"directory": ".", "content": {"raw": "x"}, "format": "zip"}, "not the task directory itself"),
        (
            {"file": "f", "content": {"raw": "x"}, "extra": 1},
            "mounts.0: additional property extra is not allowed",
        ),
    ],
)
def test_each_bad_entry_is_named_with_its_rule(entry: dict[str, Any], said: str) -> None:
    assert any(said in line for line in problems(entry)), problems(entry)


def test_overlapping_mounts_are_refused() -> None:
    said = problems({"cacheName": "c", "directory": "a"}, {"file": "a/f", "content": {"raw": "x"}})
    assert said == ["mounts.1 ('a/f') and mounts.0 ('a') overlap"]


def test_caches_need_their_scope_and_artifacts_their_task_as_a_dependency() -> None:
    mounts = [
        Mount("cache", "mounts.0", "c", cache_name="proj-level-1-c"),
        Mount("file", "mounts.1", "f", Content("taskId", task_id=TASK, artifact="public/f")),
    ]
    assert requirement_problems(mounts, ["generic-worker:cache:proj-*"], [TASK]) == []
    said = requirement_problems(mounts, ["generic-worker:cache:other"], [])
    assert said == [
        "malformed payload: mounts.0 (cache 'proj-level-1-c') needs the task scope "
        "'generic-worker:cache:proj-level-1-c', which task.scopes does not grant",
        f"malformed payload: task.dependencies needs to include {TASK} "
        "since mounts.1 mounts one of its artifacts",
    ]


def test_a_cache_in_use_is_not_lent_to_a_second_task(tmp_path: Path) -> None:
    caches = Caches(tmp_path)
    first, new = caches.borrow("c")
    assert new  # not on disk while lent: it is in the task's directory
    second, new = caches.borrow("c")
    assert new and second != first  # a new, empty cache of the same name
    first.mkdir()  # given back: moved home from the task's directory
    caches.give_back(first)
    again, new = caches.borrow("c")
    assert (again, new) == (first, False)
    third, new = caches.borrow("c")
    assert new and third not in (first, second)
    second.mkdir()
    caches.drop(second)
    assert not second.exists()

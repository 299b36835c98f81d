"""Artifacts: what `collect` finds in the task directory, and how `upload_all` uploads it and turns
the queue's refusals into the task's outcome."""

from __future__ import annotations

import asyncio
import gzip
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from taskyard.model import dates
from taskyard.model.client_errors import Refused, Unreachable
from taskyard.worker.payload import ArtifactSpec
from taskyard.worker.uploads import (
    Announced,
    ErrorArtifact,
    FileUpload,
    Problem,
    collect,
    upload_all,
    upload_one,
)

EXPIRES = dates.parse_iso("2031-01-02T03:04:05.678Z")


def spec(
    path: str,
    name: str,
    *,
    kind: str = "file",
    optional: bool = False,
    content_type: str | None = None,
    content_encoding: str | None = None,
) -> ArtifactSpec:
    return ArtifactSpec(kind, path, name, EXPIRES, content_type, content_encoding, optional)


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    path = tmp_path / "task"
    path.mkdir()
    return path


def put_file(task_dir: Path, relative: str, data: bytes = b"data\n") -> Path:
    path = task_dir / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


# collect -----------------------------------------------------------------------------------


def test_a_file_artifact_is_one_upload_with_a_type_and_encoding_from_its_name(task_dir: Path) -> None:
    path = put_file(task_dir, "out/report.json")
    assert collect([spec("out/report.json", "public/report.json")], task_dir) == [
        FileUpload("public/report.json", path, EXPIRES, "application/json", "gzip")
    ]


@pytest.mark.parametrize(
    ("file", "content_type", "encoding"),
    [
        ("notes.txt", "text/plain; charset=utf-8", "gzip"),
        ("image.png", "image/png", "identity"),
        ("build.tar.gz", "application/gzip", "identity"),
        ("program", "application/octet-stream", "gzip"),
    ],
)
def test_an_artifact_without_a_declared_type_gets_one_guessed_from_its_file_name(
    task_dir: Path, file: str, content_type: str, encoding: str
) -> None:
    put_file(task_dir, file)
    [upload] = collect([spec(file, "public/artifact")], task_dir)
    assert isinstance(upload, FileUpload)
    assert (upload.content_type, upload.content_encoding) == (content_type, encoding)


def test_a_declared_type_and_encoding_win_over_the_guess(task_dir: Path) -> None:
    put_file(task_dir, "image.png")
    declared = spec("image.png", "public/x", content_type="text/x-custom", content_encoding="gzip")
    [upload] = collect([declared], task_dir)
    assert isinstance(upload, FileUpload)
    assert (upload.content_type, upload.content_encoding) == ("text/x-custom", "gzip")


def test_a_directory_artifact_is_one_upload_per_file_named_by_its_relative_path(task_dir: Path) -> None:
    put_file(task_dir, "out/a.txt")
    put_file(task_dir, "out/sub/b.json")
    put_file(task_dir, "out/sub/deeper/c.png")
    (task_dir / "out/empty").mkdir()
    found = collect([spec("out", "public/build", kind="directory")], task_dir)
    assert [(u.name, u.content_type, u.content_encoding) for u in found if isinstance(u, FileUpload)] == [
        ("public/build/a.txt", "text/plain; charset=utf-8", "gzip"),
        ("public/build/sub/b.json", "application/json", "gzip"),
        ("public/build/sub/deeper/c.png", "image/png", "identity"),
    ]
    assert len(found) == 3
    assert found[2].path == (task_dir / "out/sub/deeper/c.png").resolve()  # type: ignore[union-attr]


def test_a_directory_name_with_a_trailing_slash_does_not_double_it(task_dir: Path) -> None:
    put_file(task_dir, "out/a.txt")
    [upload] = collect([spec("out", "public/build/", kind="directory")], task_dir)
    assert upload.name == "public/build/a.txt"


def test_a_missing_directory_named_with_a_trailing_slash_is_an_error_artifact_without_it(
    task_dir: Path,
) -> None:
    """The queue refuses a name with an empty segment: the error artifact drops the `/`, as its files do."""
    [error] = collect([spec("out", "public/build/", kind="directory")], task_dir)
    assert isinstance(error, ErrorArtifact) and error.name == "public/build"


def test_an_empty_directory_uploads_nothing(task_dir: Path) -> None:
    (task_dir / "out").mkdir()
    assert collect([spec("out", "public/build", kind="directory")], task_dir) == []


@pytest.mark.parametrize(("kind", "word"), [("file", "file"), ("directory", "directory")])
@pytest.mark.parametrize("optional", [False, True])
def test_a_missing_artifact_is_an_error_artifact_naming_the_absolute_path(
    task_dir: Path, kind: str, word: str, optional: bool
) -> None:
    found = collect([spec("out/missing", "public/missing", kind=kind, optional=optional)], task_dir)
    where = task_dir.resolve() / "out" / "missing"
    assert found == [
        ErrorArtifact(
            "public/missing",
            "file-missing-on-worker",
            f"Could not read {word} '{where}'",
            EXPIRES,
            optional,
        )
    ]


def test_a_file_artifact_that_is_a_directory_is_an_invalid_resource(task_dir: Path) -> None:
    (task_dir / "out").mkdir()
    [error] = collect([spec("out", "public/out")], task_dir)
    assert isinstance(error, ErrorArtifact)
    assert error.reason == "invalid-resource-on-worker"
    assert error.message == (
        f"File artifact '{task_dir.resolve() / 'out'}' exists as a directory, not a file, on the worker"
    )


def test_a_directory_artifact_that_is_a_file_is_an_invalid_resource(task_dir: Path) -> None:
    put_file(task_dir, "out")
    [error] = collect([spec("out", "public/out", kind="directory")], task_dir)
    assert isinstance(error, ErrorArtifact)
    assert error.reason == "invalid-resource-on-worker"
    assert error.message == (
        f"Directory artifact '{task_dir.resolve() / 'out'}' exists as a file, not a directory, on the worker"
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file_is_an_error_artifact(task_dir: Path) -> None:
    path = put_file(task_dir, "secret.txt")
    path.chmod(0)
    [error] = collect([spec("secret.txt", "public/secret.txt")], task_dir)
    assert isinstance(error, ErrorArtifact)
    assert error.reason == "file-not-readable-on-worker"
    assert error.message == f"Could not read file '{path.resolve()}'"


# upload_all --------------------------------------------------------------------------------


@dataclass
class Queue:
    """createArtifact and the blob PUT, in memory; `fail` maps a name to what its call raises."""

    created: dict[str, dict[str, Any]] = field(default_factory=dict)
    stored: dict[str, tuple[bytes, int, str, str]] = field(default_factory=dict)
    fail_create: dict[str, Exception] = field(default_factory=dict)
    fail_put: dict[str, Exception] = field(default_factory=dict)
    delay: dict[str, float] = field(default_factory=dict)
    in_flight: int = 0
    most_in_flight: int = 0

    async def create(self, name: str, body: dict[str, Any]) -> Any:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(self.delay.get(name, 0.0))
        if name in self.fail_create:
            self.in_flight -= 1
            raise self.fail_create[name]
        self.created[name] = body
        if body["storageType"] == "error":
            self.in_flight -= 1
            return {"storageType": "error"}
        return {"storageType": "s3", "putUrl": f"https://blobs.example/{name}"}

    async def put(self, url: str, chunks: AsyncIterator[bytes], size: int, ctype: str, enc: str) -> None:
        name = url.removeprefix("https://blobs.example/")
        try:
            data = b"".join([chunk async for chunk in chunks])
            if name in self.fail_put:
                raise self.fail_put[name]
            self.stored[name] = (data, size, ctype, enc)
        finally:
            self.in_flight -= 1


def upload(
    task_dir: Path, name: str, data: bytes, *, encoding: str, content_type: str = "text/plain"
) -> FileUpload:
    path = put_file(task_dir, name.replace("/", "_"), data)
    return FileUpload(name, path, EXPIRES, content_type, encoding)


async def upload_everything(
    items: list[FileUpload | ErrorArtifact], queue: Queue, scratch: Path
) -> Problem | None:
    return await upload_all(items, queue.create, queue.put, scratch)


async def test_a_gzip_upload_sends_the_compressed_file_and_its_compressed_size(
    task_dir: Path, tmp_path: Path
) -> None:
    data = b"a line of log output\n" * 20_000  # past one read of the file
    queue = Queue()
    item = upload(task_dir, "public/logs/live.log", data, encoding="gzip")
    assert await upload_everything([item], queue, tmp_path / "scratch") is None
    sent, size, ctype, enc = queue.stored["public/logs/live.log"]
    assert gzip.decompress(sent) == data
    assert size == len(sent) < len(data)
    assert (ctype, enc) == ("text/plain", "gzip")
    assert queue.created["public/logs/live.log"] == {
        "storageType": "s3",
        "contentType": "text/plain",
        "expires": "2031-01-02T03:04:05.678Z",
        "contentLength": len(sent),
        "contentEncoding": "gzip",  # the upload URL is signed for it
    }
    assert list((tmp_path / "scratch").iterdir()) == []  # the compressed copy is gone


async def test_an_identity_upload_sends_the_file_as_it_is(task_dir: Path, tmp_path: Path) -> None:
    data = os.urandom(600_000)
    queue = Queue()
    item = upload(task_dir, "public/image.png", data, encoding="identity", content_type="image/png")
    assert await upload_everything([item], queue, tmp_path / "scratch") is None
    assert queue.stored["public/image.png"] == (data, len(data), "image/png", "identity")
    assert queue.created["public/image.png"]["contentLength"] == len(data)
    assert "contentEncoding" not in queue.created["public/image.png"]  # identity: what TaskCluster knows


@pytest.mark.parametrize("optional", [False, True])
async def test_an_error_artifact_is_created_and_fails_the_task_unless_optional(
    tmp_path: Path, optional: bool
) -> None:
    queue = Queue()
    message = "Could not read file '/task/nothing.txt'"
    item = ErrorArtifact("public/nothing.txt", "file-missing-on-worker", message, EXPIRES, optional)
    problem = await upload_everything([item], queue, tmp_path)
    assert queue.created == {
        "public/nothing.txt": {
            "storageType": "error",
            "reason": "file-missing-on-worker",
            "message": message,
            "expires": "2031-01-02T03:04:05.678Z",
        }
    }
    if optional:
        assert problem is None
    else:
        assert problem == Problem(
            "failed",
            "failed",
            f"TASK FAILURE during artifact upload: file-missing-on-worker: {message}",
        )


REFUSALS: list[tuple[Exception, str, str, str]] = [
    (Refused(409, "RequestConflict", "different content"), "exception", "malformed-payload", "conflict"),
    (Refused(413, "PayloadTooLarge", "over the limit"), "failed", "failed", "too large"),
    (Refused(500, "InternalServerError", "oops"), "exception", "resource-unavailable", "oops"),
    (Refused(503, "", "try later"), "exception", "resource-unavailable", "try later"),
    (Unreachable("POST /artifacts: ConnectError"), "exception", "resource-unavailable", "ConnectError"),
    (Refused(400, "InputError", "bad body"), "exception", "internal-error", "bad body"),
]


@pytest.mark.parametrize("where", ["create", "put"])
@pytest.mark.parametrize(
    ("error", "state", "reason", "says"),
    REFUSALS,
    ids=["409", "413", "500", "503", "unreachable", "400"],
)
async def test_a_refusal_decides_the_outcome(
    task_dir: Path, tmp_path: Path, where: str, error: Exception, state: str, reason: str, says: str
) -> None:
    queue = Queue()
    getattr(queue, f"fail_{where}")["public/a.txt"] = error
    item = upload(task_dir, "public/a.txt", b"a\n", encoding="identity")
    problem = await upload_everything([item], queue, tmp_path)
    assert problem is not None
    assert (problem.state, problem.reason) == (state, reason)
    assert "public/a.txt" in problem.message and says in problem.message


async def test_a_refused_error_artifact_is_an_exception_too(tmp_path: Path) -> None:
    queue = Queue(fail_create={"public/x": Refused(503, "", "down")})
    item = ErrorArtifact("public/x", "file-missing-on-worker", "gone", EXPIRES, optional=True)
    problem = await upload_everything([item], queue, tmp_path)
    assert problem is not None and problem.reason == "resource-unavailable"


async def test_at_most_ten_uploads_are_in_flight_and_one_problem_does_not_stop_the_rest(
    task_dir: Path, tmp_path: Path
) -> None:
    items: list[FileUpload | ErrorArtifact] = [
        upload(task_dir, f"public/f{i}.txt", b"x" * i, encoding="identity") for i in range(25)
    ]
    queue = Queue(
        delay={item.name: 0.01 for item in items}, fail_put={"public/f3.txt": Refused(500, "", "x")}
    )
    problem = await upload_everything(items, queue, tmp_path)
    assert queue.most_in_flight == 10
    assert problem is not None and problem.reason == "resource-unavailable"
    assert sorted(queue.stored) == sorted(item.name for item in items if item.name != "public/f3.txt")


async def test_the_first_problem_in_items_order_wins_not_the_first_to_happen(
    task_dir: Path, tmp_path: Path
) -> None:
    slow = upload(task_dir, "public/slow.bin", b"s", encoding="identity")
    fast = upload(task_dir, "public/fast.bin", b"f", encoding="identity")
    missing = ErrorArtifact("public/missing", "file-missing-on-worker", "gone", EXPIRES, optional=False)
    queue = Queue(
        delay={"public/slow.bin": 0.1},
        fail_create={"public/slow.bin": Refused(413, "", "big"), "public/fast.bin": Refused(409, "", "dup")},
    )
    problem = await upload_everything([slow, fast, missing], queue, tmp_path)
    assert problem is not None
    assert (problem.state, problem.reason) == ("failed", "failed")
    assert "public/slow.bin is too large" in problem.message


# Announced: the log's createArtifact sent while the commands run ---------------------------


@dataclass
class CountingQueue(Queue):
    """Queue, counting createArtifact calls and answering upload URLs that expire `url_life_ms` on."""

    creates: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    url_life_ms: int = 45 * 60 * 1000

    async def create(self, name: str, body: dict[str, Any]) -> Any:
        self.creates.append((name, dict(body)))
        answer = await super().create(name, body)
        return {**answer, "expires": dates.to_iso(dates.now_ms() + self.url_life_ms)}


async def test_an_announced_log_is_created_once_ahead_and_only_put_at_the_end(
    task_dir: Path, tmp_path: Path
) -> None:
    queue = CountingQueue()
    item = upload(task_dir, "public/logs/live_backing.log", b"", encoding="gzip")
    announced = Announced(item, queue.create)
    await asyncio.sleep(0)  # the early call goes out before the log is written
    assert [name for name, _ in queue.creates] == [item.name] and queue.stored == {}
    item.path.write_bytes(b"the whole log\n")
    assert await upload_one(item, announced.create, queue.put, tmp_path) is None
    assert len(queue.creates) == 1  # the end costs only the PUT
    assert "contentLength" not in queue.creates[0][1]  # not known when it was created
    sent, size, _, enc = queue.stored[item.name]
    assert (gzip.decompress(sent), size, enc) == (b"the whole log\n", len(sent), "gzip")


async def test_an_announced_log_asks_again_with_the_same_body_if_the_early_call_failed(
    task_dir: Path, tmp_path: Path
) -> None:
    queue = CountingQueue(fail_create={"public/log": Unreachable("down")})
    item = upload(task_dir, "public/log", b"x\n", encoding="gzip")
    announced = Announced(item, queue.create)
    await asyncio.sleep(0.01)
    del queue.fail_create["public/log"]
    assert await upload_one(item, announced.create, queue.put, tmp_path) is None
    assert [body for _, body in queue.creates] == [queue.creates[0][1]] * 2
    assert gzip.decompress(queue.stored["public/log"][0]) == b"x\n"


async def test_an_announced_log_whose_early_refusal_persists_is_a_problem(
    task_dir: Path, tmp_path: Path
) -> None:
    queue = CountingQueue(fail_create={"public/log": Refused(413, "", "too big")})
    item = upload(task_dir, "public/log", b"x\n", encoding="gzip")
    problem = await upload_one(item, Announced(item, queue.create).create, queue.put, tmp_path)
    assert problem is not None and (problem.state, problem.reason) == ("failed", "failed")
    assert len(queue.creates) == 2 and queue.stored == {}


async def test_an_announced_url_about_to_expire_is_asked_for_again(task_dir: Path, tmp_path: Path) -> None:
    queue = CountingQueue(url_life_ms=60_000)  # a task that ran for most of the URL's life
    item = upload(task_dir, "public/log", b"x\n", encoding="gzip")
    assert await upload_one(item, Announced(item, queue.create).create, queue.put, tmp_path) is None
    assert len(queue.creates) == 2 and "public/log" in queue.stored


async def test_an_announced_call_not_used_is_dropped(task_dir: Path) -> None:
    queue = CountingQueue(delay={"public/log": 10.0})
    announced = Announced(upload(task_dir, "public/log", b"", encoding="gzip"), queue.create)
    await asyncio.sleep(0)
    announced.cancel()
    await asyncio.sleep(0)
    assert queue.created == {}

"""Payload `mounts` on a real `taskyard worker` against a real `taskyard serve` (SQLite): caches kept
between tasks, files and archives from other tasks' artifacts and from URLs, and every bad mount
ending the task exception/malformed-payload with a message naming it."""

from __future__ import annotations

import hashlib
import http.server
import io
import sys
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import taskcluster

from tests.e2e.conftest import Server
from tests.e2e.workers import (
    WorkerProcess,
    create,
    fetch,
    log_text,
    resolved,
    sh,
    sqlite_module_db_url,
    worker_process,
)

__all__ = ["sqlite_module_db_url", "worker_process"]  # the module's fixtures, from tests/e2e/workers.py


@pytest.fixture
def files(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A directory served over HTTP on 127.0.0.1, and its base URL."""
    root = tmp_path / "served"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def tar_gz(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def finished(queue: taskcluster.Queue, server: Server, task_id: str) -> tuple[dict[str, Any], str]:
    run = resolved(queue, task_id)
    return run, log_text(server, task_id)


# Caches ---------------------------------------------------------------------------------------


def test_a_cache_written_by_one_task_is_read_by_the_next(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    name = f"{tq}-level-1-checkouts"
    mount = {"mounts": [{"cacheName": name, "directory": "checkouts"}]}
    scopes = [f"generic-worker:cache:{name}"]
    first = create(queue, tq, {"command": sh("echo kept > checkouts/state"), **mount}, scopes=scopes)
    assert resolved(queue, first)["state"] == "completed", log_text(server, first)
    second = create(queue, tq, {"command": sh("echo found $(cat checkouts/state)"), **mount}, scopes=scopes)
    run, log = finished(queue, server, second)
    assert run["state"] == "completed", log
    assert "found kept" in log


def test_an_exit_code_listed_in_purge_caches_deletes_the_cache(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    name = f"{tq}-purged"
    payload = {"mounts": [{"cacheName": name, "directory": "c"}], "onExitStatus": {"purgeCaches": [3]}}
    scopes = [f"generic-worker:cache:{name}"]
    first = create(queue, tq, {"command": sh("echo half > c/state; exit 3"), **payload}, scopes=scopes)
    run, log = finished(queue, server, first)
    assert run["state"] == "failed"
    assert "Purging caches since the last command's exit code 3 is in onExitStatus.purgeCaches" in log
    second = create(
        queue, tq, {"command": sh("test ! -e c/state && echo clean cache"), **payload}, scopes=scopes
    )
    run, log = finished(queue, server, second)
    assert run["state"] == "completed", log
    assert "clean cache" in log


def test_a_cache_without_its_scope_is_refused_naming_the_scope(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    task_id = create(queue, tq, {"command": sh("true"), "mounts": [{"cacheName": "c", "directory": "c"}]})
    run, log = finished(queue, server, task_id)
    assert (run["state"], run["reasonResolved"]) == ("exception", "malformed-payload")
    assert "mounts.0 (cache 'c') needs the task scope 'generic-worker:cache:c'" in log


# Content from artifacts -------------------------------------------------------------------------

MAKE_ARCHIVES = """
import io, os, tarfile, zipfile
os.makedirs("artifacts/sub", exist_ok=True)
open("artifacts/data.txt", "w").write("from the artifact\\n")
open("artifacts/sub/deep.txt", "w").write("deep\\n")
with tarfile.open("artifacts/tree.tar.gz", "w:gz") as tar:
    data = b"from the tar\\n"
    info = tarfile.TarInfo("inner/t.txt"); info.size = len(data); tar.addfile(info, io.BytesIO(data))
with zipfile.ZipFile("artifacts/tree.zip", "w") as z:
    z.writestr("inner/z.txt", "from the zip\\n")
"""


def test_files_and_archives_mount_from_another_task_s_directory_artifact(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    # As a decision task does: its whole artifacts/ folder uploaded as `public/`.
    producer = create(
        queue,
        tq,
        {
            "command": [[sys.executable, "-c", MAKE_ARCHIVES]],
            "artifacts": [{"type": "directory", "path": "artifacts", "name": "public/"}],
        },
    )
    assert resolved(queue, producer)["state"] == "completed", log_text(server, producer)
    assert fetch(server, producer, "public/sub/deep.txt").text == "deep\n"
    assert fetch(server, producer, "public/data.txt").text == "from the artifact\n"

    def content(name: str) -> dict[str, str]:
        return {"taskId": producer, "artifact": name}

    consumer = create(
        queue,
        tq,
        {
            "command": sh("cat fetched/data.txt t/inner/t.txt z/inner/z.txt"),
            "mounts": [
                {"file": "fetched/data.txt", "content": content("public/data.txt")},
                {"directory": "t", "content": content("public/tree.tar.gz"), "format": "tar.gz"},
                {"directory": "z", "content": content("public/tree.zip"), "format": "zip"},
            ],
        },
        dependencies=[producer],
    )
    run, log = finished(queue, server, consumer)
    assert run["state"] == "completed", log
    for said in ("from the artifact", "from the tar", "from the zip"):
        assert said in log


def test_a_private_artifact_mounts_only_with_its_get_artifact_scope(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    producer = create(
        queue,
        tq,
        {
            "command": sh("mkdir -p out && echo secret > out/s.txt"),
            "artifacts": [{"type": "file", "path": "out/s.txt", "name": "private/s.txt"}],
        },
    )
    assert resolved(queue, producer)["state"] == "completed", log_text(server, producer)
    payload = {
        "command": sh("cat s.txt"),
        "mounts": [{"file": "s.txt", "content": {"taskId": producer, "artifact": "private/s.txt"}}],
    }
    refused = create(queue, tq, payload, dependencies=[producer])
    run, log = finished(queue, server, refused)
    assert (run["state"], run["reasonResolved"]) == ("exception", "malformed-payload")
    assert (
        f"mounts.0: could not download task {producer} artifact private/s.txt: 403" in log
        and "queue:get-artifact:private/s.txt" in log
    )
    allowed = create(queue, tq, payload, dependencies=[producer], scopes=["queue:get-artifact:private/s.txt"])
    run, log = finished(queue, server, allowed)
    assert run["state"] == "completed", log
    assert "secret" in log


def test_content_found_through_an_index_namespace_mounts(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    producer = create(
        queue,
        tq,
        {
            "command": sh("mkdir -p out && echo indexed > out/i.txt"),
            "artifacts": [{"type": "file", "path": "out/i.txt", "name": "public/i.txt"}],
        },
    )
    assert resolved(queue, producer)["state"] == "completed", log_text(server, producer)
    namespace = f"mounts.{tq.replace('/', '.')}.latest".lower()
    expires = queue.task(producer)["expires"]
    taskcluster.Index(server.options()).insertTask(
        namespace, {"taskId": producer, "rank": 0, "data": {}, "expires": expires}
    )
    mounts = [{"file": "i.txt", "content": {"namespace": namespace, "artifact": "public/i.txt"}}]
    scopes = [f"index:find-task:{namespace}*"]  # the index checks it against the claim's credentials
    consumer = create(queue, tq, {"command": sh("cat i.txt"), "mounts": mounts}, scopes=scopes)
    run, log = finished(queue, server, consumer)
    assert run["state"] == "completed", log
    assert "indexed" in log
    missing = [
        {"file": "i.txt", "content": {"namespace": f"{namespace}.missing", "artifact": "public/i.txt"}}
    ]
    refused = create(queue, tq, {"command": sh("true"), "mounts": missing}, scopes=scopes)
    run, log = finished(queue, server, refused)
    assert (run["state"], run["reasonResolved"]) == ("exception", "malformed-payload")
    assert f"mounts.0: could not download namespace {namespace}.missing artifact public/i.txt: 404" in log


def test_an_artifact_of_a_task_not_depended_on_is_refused(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    other = "aaaaaaaaTaaaaaaaaaaaaA"
    mount = {"file": "f", "content": {"taskId": other, "artifact": "public/x"}}
    task_id = create(queue, tq, {"command": sh("true"), "mounts": [mount]})
    run, log = finished(queue, server, task_id)
    assert (run["state"], run["reasonResolved"]) == ("exception", "malformed-payload")
    assert f"task.dependencies needs to include {other} since mounts.0 mounts one of its artifacts" in log


# Content from URLs ------------------------------------------------------------------------------


def test_a_url_mount_with_its_sha256_is_run(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess, files: tuple[Path, str]
) -> None:
    root, base = files
    script = b"#!/bin/sh\necho run-task ran with $1\n"
    (root / "run-task").write_bytes(script)
    mount = {
        "file": "./run-task",
        "content": {"url": f"{base}/run-task", "sha256": hashlib.sha256(script).hexdigest()},
    }
    task_id = create(
        queue, tq, {"command": [["chmod", "+x", "run-task"], ["./run-task", "it"]], "mounts": [mount]}
    )
    run, log = finished(queue, server, task_id)
    assert run["state"] == "completed", log
    assert "run-task ran with it" in log


def test_run_task_mounts_from_the_decision_s_artifact_url_as_taskgraph_writes_it(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    decision = create(
        queue,
        tq,
        {
            "command": sh(
                "mkdir -p artifacts && printf '#!/bin/sh\\necho run-task says $*\\n' > artifacts/run-task"
            ),
            "artifacts": [{"type": "directory", "path": "artifacts", "name": "public"}],
        },
    )
    assert resolved(queue, decision)["state"] == "completed", log_text(server, decision)
    url = f"{server.root_url}/api/queue/v1/task/{decision}/artifacts/public/run-task"
    task_id = create(
        queue,
        tq,
        {
            "command": [["chmod", "+x", "run-task"], ["./run-task", "--", "hello"]],
            "mounts": [{"content": {"url": url}, "file": "./run-task"}],
        },
        dependencies=[decision],
    )
    run, log = finished(queue, server, task_id)
    assert run["state"] == "completed", log
    assert "run-task says -- hello" in log


def test_a_sha256_mismatch_ends_the_task_before_its_commands(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess, files: tuple[Path, str]
) -> None:
    root, base = files
    (root / "f").write_bytes(b"other content")
    wanted = "0" * 64
    mount = {"file": "f", "content": {"url": f"{base}/f", "sha256": wanted}}
    task_id = create(queue, tq, {"command": sh("echo the command ran"), "mounts": [mount]})
    run, log = finished(queue, server, task_id)
    assert (run["state"], run["reasonResolved"]) == ("exception", "malformed-payload")
    assert f"mounts.0: download of url {base}/f has SHA256 " in log
    assert f"but the task payload requires {wanted}" in log
    assert "the command ran" not in log


def test_an_archive_with_dot_dot_entries_is_refused(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess, files: tuple[Path, str]
) -> None:
    root, base = files
    (root / "evil.tar.gz").write_bytes(tar_gz({"ok.txt": b"fine", "../x": b"escaped"}))
    mount = {"directory": "d", "content": {"url": f"{base}/evil.tar.gz"}, "format": "tar.gz"}
    task_id = create(queue, tq, {"command": sh("true"), "mounts": [mount]})
    run, log = finished(queue, server, task_id)
    assert (run["state"], run["reasonResolved"]) == ("exception", "malformed-payload")
    assert "mounts.0: url " in log and "entry '../x' has a '..' in its path" in log
    assert not list(worker.work_dir.glob("tasks/*/x"))


def test_a_mount_path_leaving_the_task_directory_is_refused(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    mounts = [{"file": "../escape", "content": {"raw": "x"}}, {"file": "/tmp/abs", "content": {"raw": "x"}}]
    task_id = create(queue, tq, {"command": sh("true"), "mounts": mounts})
    run, log = finished(queue, server, task_id)
    assert (run["state"], run["reasonResolved"]) == ("exception", "malformed-payload")
    assert "mounts.0.file must stay inside the task directory: no '..'" in log
    assert "mounts.1.file must be relative to the task directory" in log
    assert not (worker.work_dir / "tasks" / "escape").exists()


def test_a_mount_the_file_system_refuses_ends_the_task_naming_it(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    mounts = [{"file": "x" * 300, "content": {"raw": "x"}}]  # longer than any file name may be
    task_id = create(queue, tq, {"command": sh("echo the command ran"), "mounts": mounts})
    run, log = finished(queue, server, task_id)
    assert (run["state"], run["reasonResolved"]) == ("exception", "malformed-payload")
    assert f"mounts.0: cannot mount {'x' * 300}: File name too long" in log
    assert "the command ran" not in log

"""`taskyard worker` as a real process, running real commands for a real server.

The worker talks HTTP only, so these run on SQLite; the live log's server side is tested on both
backends in tests/queue and tests/api.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import taskcluster

from tests.e2e import helpers
from tests.e2e.conftest import TASKYARD, Server, free_port, start_server
from tests.e2e.workers import (
    WorkerProcess,
    create,
    fetch,
    log_text,
    resolved,
    running,
    sh,
    sqlite_module_db_url,
    wait_for,
    worker_process,
)

__all__ = ["sqlite_module_db_url", "worker_process"]  # the module's fixtures, from tests/e2e/workers.py


@pytest.fixture
def sqlite_url(tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A fresh SQLite database of this test alone."""
    db = tmp_path / "db.sqlite3"
    shutil.copy(request.getfixturevalue("sqlite_template"), db)
    return f"sqlite:///{db}"


@contextlib.contextmanager
def server_with_worker(
    sqlite_url: str, tmp_path: Path, tq: str, worker_args: list[str] | None = None, **options: Any
) -> Iterator[Server]:
    """A server of this test alone (`start_server` options) with a worker on `tq`."""
    own = start_server(sqlite_url, tmp_path / "server", **options)
    process = WorkerProcess(own, tq, tmp_path / "work", args=worker_args or []).start()
    try:
        yield own
    finally:
        process.stop()
        own.stop()


# Outcomes -----------------------------------------------------------------------------------


def test_a_task_completes_with_its_log_and_artifacts(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    script = (
        "echo hello from $TASK_ID run $RUN_ID; mkdir -p out/sub; "
        "echo one > out/a.txt; echo two > out/sub/b.txt"
    )
    payload = {
        "command": sh(script),
        "artifacts": [
            {"type": "file", "path": "out/a.txt", "name": "public/a.txt"},
            {"type": "directory", "path": "out", "name": "public/out"},
        ],
    }
    task_id = create(queue, tq, payload)
    run = resolved(queue, task_id)
    assert (run["state"], run["reasonResolved"]) == ("completed", "completed")
    log = log_text(server, task_id)
    assert f"hello from {task_id} run 0" in log
    assert "=== Task Finished ===" in log
    assert "[taskcluster " in log
    assert fetch(server, task_id, "public/a.txt").text == "one\n"
    assert fetch(server, task_id, "public/out/sub/b.txt").text == "two\n"
    names = {a["name"]: a for a in queue.listArtifacts(task_id, "0")["artifacts"]}
    assert names["public/logs/live.log"]["storageType"] == "link"
    assert names["public/logs/live.log"]["contentType"] == "text/plain; charset=utf-8"
    assert names["public/logs/live_backing.log"]["storageType"] == "s3"
    assert names["public/a.txt"]["contentType"].startswith("text/plain")


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (sh("echo about to fail; exit 3"), "exited with code 3"),
        ([["no-such-command-anywhere"]], "could not run command"),
    ],
)
def test_a_failing_command_fails_the_task(
    server: Server,
    queue: taskcluster.Queue,
    tq: str,
    worker: WorkerProcess,
    command: list[list[str]],
    said: str,
) -> None:
    task_id = create(queue, tq, {"command": [*command, ["/bin/sh", "-c", "echo never runs"]]})
    run = resolved(queue, task_id)
    assert (run["state"], run["reasonResolved"]) == ("failed", "failed")
    log = log_text(server, task_id)
    assert said in log
    assert "never runs" not in log.splitlines()


def test_a_retry_exit_code_is_an_intermittent_exception(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    task_id = create(queue, tq, {"command": sh("exit 7"), "onExitStatus": {"retry": [7]}}, retries=0)
    run = resolved(queue, task_id)
    assert (run["state"], run["reasonResolved"]) == ("exception", "intermittent-task")
    assert "exit code 7 found in task payload.onExitStatus list" in log_text(server, task_id)


def test_a_malformed_payload_says_which_field_and_why(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    task_id = create(queue, tq, {"command": sh("true"), "env": {"COUNT": 3}, "bogus": 1})
    run = resolved(queue, task_id)
    assert (run["state"], run["reasonResolved"]) == ("exception", "malformed-payload")
    log = log_text(server, task_id)
    # The errors lead; the schema follows for reference.
    assert log.index("- env.COUNT: ") < log.index("must conform to the following jsonschema")
    assert "bogus" in log
    assert f"validation of payload failed for task {task_id}" in log
    # ... and the worker goes on serving other tasks.
    next_task = create(queue, tq, {"command": sh("true")})
    assert resolved(queue, next_task)["state"] == "completed"


def test_max_run_time_kills_the_commands_and_fails_the_task(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    task_id = create(queue, tq, {"command": sh("echo started; sleep 30; echo too late"), "maxRunTime": 1})
    run = resolved(queue, task_id, timeout=30)
    assert (run["state"], run["reasonResolved"]) == ("failed", "failed")
    log = log_text(server, task_id)
    lines = log.splitlines()
    assert "started" in lines and "too late" not in lines
    assert "Aborting task" in log and "max run time exceeded" in log


def test_missing_artifacts_become_error_artifacts(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    optional = {"type": "file", "path": "nothing.txt", "name": "public/optional.txt", "optional": True}
    required = {"type": "file", "path": "nothing.txt", "name": "public/required.txt"}
    calm = create(queue, tq, {"command": sh("true"), "artifacts": [optional]})
    assert resolved(queue, calm)["state"] == "completed"
    assert fetch(server, calm, "public/optional.txt").status_code == 424
    failing = create(queue, tq, {"command": sh("true"), "artifacts": [required]})
    assert resolved(queue, failing)["state"] == "failed"
    response = fetch(server, failing, "public/required.txt")
    assert response.status_code == 424
    assert "file-missing-on-worker" in log_text(server, failing)


def test_an_artifact_past_the_size_limit_fails_the_task_with_a_reason(
    sqlite_url: str, tmp_path: Path, tq: str
) -> None:
    with server_with_worker(sqlite_url, tmp_path, tq, extra_args=["--max-artifact-bytes", "4000"]) as small:
        queue = small.client()
        big = {"type": "file", "path": "big.bin", "name": "public/big.bin", "contentEncoding": "identity"}
        script = sh("head -c 10000 /dev/urandom > big.bin")
        task_id = create(queue, tq, {"command": script, "artifacts": [big]})
        run = resolved(queue, task_id)
        assert (run["state"], run["reasonResolved"]) == ("failed", "failed")
        assert "artifact public/big.bin is too large" in log_text(small, task_id)


def test_a_full_work_directory_fails_one_task_and_the_worker_goes_on(
    server: Server, queue: taskcluster.Queue, tq: str, tmp_path: Path
) -> None:
    # Files can't grow past 1 MB for the worker and its commands: a log past that can't be written.
    process = WorkerProcess(server, tq, tmp_path / "work", max_file_bytes=1_000_000).start()
    try:
        flood = create(queue, tq, {"command": sh("head -c 3000000 /dev/zero | tr '\\0' x; echo")})
        run = resolved(queue, flood, timeout=20)
        assert (run["state"], run["reasonResolved"]) == ("exception", "internal-error"), process.log_tail()
        assert "cannot write the task log" in process.log_tail()
        calm = create(queue, tq, {"command": sh("echo still working")})
        assert resolved(queue, calm)["state"] == "completed"
        assert "still working" in log_text(server, calm)
    finally:
        process.stop()


def test_an_internal_error_is_reported_before_the_log_is_uploaded(
    server: Server, queue: taskcluster.Queue, tq: str, tmp_path: Path
) -> None:
    """The worker document, Responding to Internal Errors: "the worker can still upload artifacts after
    reporting exception ... So the workers should first resolve the task as exception." A log the
    worker cannot write is its internal error: the run is reported first, its log uploaded after."""
    process = WorkerProcess(
        server, tq, tmp_path / "work", max_file_bytes=1_000_000, env={"TASKYARD_LOG_LEVEL": "DEBUG"}
    ).start()
    try:
        flood = create(queue, tq, {"command": sh("head -c 3000000 /dev/zero | tr '\\0' x; echo")})
        run = resolved(queue, flood, timeout=20)
        assert (run["state"], run["reasonResolved"]) == ("exception", "internal-error"), process.log_tail()
        reported, uploaded = f"{flood}/0>: exception (internal-error)", f"{flood}/0>: uploaded the task log"
        helpers.wait_for(
            lambda: uploaded in process.log_path.read_text(), what="the log's upload", timeout=20
        )
        lines = process.log_path.read_text().splitlines()
        first = {
            what: next(i for i, line in enumerate(lines) if what in line) for what in (reported, uploaded)
        }
        assert first[reported] < first[uploaded], process.log_tail()
        assert f"Task ID: {flood}" in log_text(server, flood)  # what was written, uploaded after the report
    finally:
        process.stop()


# Cancellation, claims and shutdown ------------------------------------------------------------


def test_cancelling_a_task_stops_its_processes(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    marker = tmp_path / "child.pid"
    task_id = create(queue, tq, {"command": sh(f"sleep 300 & echo $! > {marker}; wait")})
    running(queue, task_id)
    while not marker.exists() or not marker.read_text().strip():
        time.sleep(0.05)
    child = int(marker.read_text())
    queue.cancelTask(task_id)
    give_up = time.monotonic() + 20
    while _alive(child):
        assert time.monotonic() < give_up, "the cancelled task's process is still running"
        time.sleep(0.1)
    run = resolved(queue, task_id)
    assert (run["state"], run["reasonResolved"]) == ("exception", "canceled")
    # Its log is uploaded still, and the worker goes on serving other tasks.
    wait_for(queue, task_id, lambda _: fetch(server, task_id, "public/logs/live.log").status_code == 200)
    assert resolved(queue, create(queue, tq, {"command": sh("true")}))["state"] == "completed"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose: its parent (the killed shell) is gone too.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def test_short_claims_are_reclaimed_while_the_task_runs(sqlite_url: str, tmp_path: Path, tq: str) -> None:
    with server_with_worker(sqlite_url, tmp_path, tq, claim_timeout=2) as short:
        queue = short.client()
        task_id = create(queue, tq, {"command": sh("sleep 5; echo survived")})
        run = resolved(queue, task_id, timeout=60)
        assert (run["state"], run["reasonResolved"]) == ("completed", "completed")
        assert "survived" in log_text(short, task_id)


def test_a_refused_reclaim_stops_the_task_at_once(sqlite_url: str, tmp_path: Path, tq: str) -> None:
    # No status checks: only the reclaim, every second with 2 s claims, can tell the worker.
    quiet = ["--status-interval", "3600"]
    with server_with_worker(sqlite_url, tmp_path, tq, worker_args=quiet, claim_timeout=2) as short:
        queue = short.client()
        marker = tmp_path / "pid"
        task_id = create(queue, tq, {"command": sh(f"sleep 300 & echo $! > {marker}; wait")})
        running(queue, task_id)
        while not marker.exists() or not marker.read_text().strip():
            time.sleep(0.05)
        queue.cancelTask(task_id)
        give_up = time.monotonic() + 20
        while _alive(int(marker.read_text())):
            assert time.monotonic() < give_up, "the task's process outlived its refused reclaim"
            time.sleep(0.1)
        run = queue.status(task_id)["status"]["runs"][0]
        assert (run["state"], run["reasonResolved"]) == ("exception", "canceled")
        assert "reclaim failed, stopping the task" in (tmp_path / "work.log").read_text()


def test_sigterm_resolves_running_tasks_worker_shutdown(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    task_id = create(queue, tq, {"command": sh("echo working; sleep 300")}, retries=1)
    running(queue, task_id)
    time.sleep(0.5)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 72
    status = queue.status(task_id)["status"]
    assert (status["runs"][0]["state"], status["runs"][0]["reasonResolved"]) == (
        "exception",
        "worker-shutdown",
    )
    assert status["runs"][1]["state"] == "pending"  # the queue retries it
    assert "working" in log_text(server, task_id)


def test_sigint_finishes_running_tasks_and_claims_no_more(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    first = create(queue, tq, {"command": sh("sleep 2; echo finished")})
    running(queue, first)
    worker.signal(signal.SIGINT)
    later = create(queue, tq, {"command": sh("true")})
    assert worker.wait() == 71
    assert resolved(queue, first)["state"] == "completed"
    assert queue.status(later)["status"]["state"] == "pending"


def test_capacity_runs_tasks_side_by_side(
    server: Server, queue: taskcluster.Queue, tq: str, tmp_path: Path
) -> None:
    process = WorkerProcess(server, tq, tmp_path / "work", args=["--capacity", "3"]).start()
    try:
        barrier = tmp_path / "barrier"
        barrier.mkdir()
        # Each task waits until all three have started: only side-by-side runs can finish.
        script = f"touch {barrier}/$TASK_ID; while [ $(ls {barrier} | wc -l) -lt 3 ]; do sleep 0.05; done"
        ids = [create(queue, tq, {"command": sh(script), "maxRunTime": 30}) for _ in range(3)]
        assert [resolved(queue, t)["state"] for t in ids] == ["completed"] * 3
    finally:
        process.stop()


# The CLI -------------------------------------------------------------------------------------


def test_task_log_follows_a_running_task(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    task_id = create(queue, tq, {"command": sh("echo first line; sleep 4; echo last line")})
    env = {
        **os.environ,
        "TASKCLUSTER_ROOT_URL": server.root_url,
        "TASKCLUSTER_CLIENT_ID": "static/taskyard/root",
        "TASKCLUSTER_ACCESS_TOKEN": server.access_token,
    }
    follower = subprocess.Popen(
        [str(TASKYARD), "task", "log", task_id, "-f"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    try:
        assert follower.stdout is not None
        seen = b""
        while b"first line" not in seen:
            line = follower.stdout.readline()
            assert line, "the log ended before its first line"
            seen += line
        # The line arrived while the task was still running: it was followed live.
        assert queue.status(task_id)["status"]["state"] == "running"
        rest, errors = follower.communicate(timeout=60)
    finally:
        follower.kill()
    assert b"last line" in rest
    assert follower.returncode == 0, errors
    assert b"completed" in errors
    printed = subprocess.run(
        [str(TASKYARD), "task", "log", task_id], capture_output=True, env=env, timeout=60, check=True
    )
    assert b"first line" in printed.stdout and b"=== Task Finished ===" in printed.stdout


def test_get_artifact_of_a_live_log_answers_what_it_holds_now(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    marker = tmp_path / "may-finish"
    script = f"echo first line; while [ ! -e {marker} ]; do sleep 0.1; done; echo last line"
    task_id = create(queue, tq, {"command": sh(script)})
    running(queue, task_id)
    for _ in range(600):  # the worker creates the live log once the task has run a moment
        if any(a["name"] == "public/logs/live.log" for a in queue.listLatestArtifacts(task_id)["artifacts"]):
            break
        time.sleep(0.1)
    env = {
        **os.environ,
        "TASKCLUSTER_ROOT_URL": server.root_url,
        "TASKCLUSTER_CLIENT_ID": "static/taskyard/root",
        "TASKCLUSTER_ACCESS_TOKEN": server.access_token,
    }
    try:
        got = subprocess.run(
            [str(TASKYARD), "task", "get-artifact", task_id, "public/logs/live.log"],
            capture_output=True,
            env=env,
            timeout=60,
        )
        # It came back while the task still ran: the log so far, not a stream until the end.
        assert queue.status(task_id)["status"]["state"] == "running"
    finally:
        marker.touch()
    assert got.returncode == 0, got.stderr
    assert b"\nfirst line\n" in got.stdout and b"\nlast line\n" not in got.stdout
    assert b"is live" in got.stderr and f"task log {task_id} -f".encode() in got.stderr
    resolved(queue, task_id)


def test_a_worker_without_credentials_says_what_is_missing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TASKCLUSTER_", "TASKYARD_"))}
    result = subprocess.run(
        [str(TASKYARD), "worker", "--work-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 2
    assert "TASKCLUSTER_ROOT_URL" in result.stderr


def test_ctrl_c_on_up_stops_its_worker_first(sqlite_url: str, tmp_path: Path) -> None:
    up = start_server(sqlite_url, tmp_path / "up", name="up", command="up", extra_args=["--capacity", "1"])
    queue = up.client()
    task_id = create(queue, "local/default", {"command": sh("echo working; sleep 300")}, retries=1)
    running(queue, task_id)
    assert up.process is not None
    up.process.send_signal(signal.SIGINT)
    assert up.process.wait(timeout=60) == 0
    # The worker resolved its task before the API went away, and did not outlive it.
    work_dir = str((tmp_path / "up" / "work").absolute())
    assert subprocess.run(["pgrep", "-f", work_dir], capture_output=True).returncode == 1
    again = start_server(sqlite_url, tmp_path / "up", name="again", access_token=up.access_token)
    try:
        status = again.client().status(task_id)["status"]
        assert (status["runs"][0]["state"], status["runs"][0]["reasonResolved"]) == (
            "exception",
            "worker-shutdown",
        )
        assert "working" in log_text(again, task_id)
    finally:
        again.stop()


def test_the_worker_uploads_to_s3(moto_s3: str, sqlite_url: str, tmp_path: Path, tq: str) -> None:
    url = f"s3://artifacts?endpoint={moto_s3}&region=us-east-1"
    with server_with_worker(sqlite_url, tmp_path, tq, extra_args=["--artifacts", url]) as on_s3:
        queue = on_s3.client()
        report = {"type": "file", "path": "report.txt", "name": "public/report.txt"}
        script = sh("echo all good > report.txt; echo done")
        task_id = create(queue, tq, {"command": script, "artifacts": [report]})
        assert resolved(queue, task_id)["state"] == "completed"
        located = queue.artifact(task_id, "0", "public/report.txt")["url"]
        assert located.startswith(moto_s3 + "/artifacts/")
        assert fetch(on_s3, task_id, "public/report.txt").text == "all good\n"
        assert "done" in log_text(on_s3, task_id)


def test_a_restarted_worker_clears_what_dead_tasks_left(
    server: Server, queue: taskcluster.Queue, tq: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    stale = work / "tasks" / "deadTaskId-0"
    stale.mkdir(parents=True)
    (stale / "big.bin").write_bytes(b"x" * 1000)
    (work / "logs").mkdir()
    (work / "logs" / "deadTaskId-0.log").write_text("half a log")
    process = WorkerProcess(server, tq, work).start()
    try:
        assert resolved(queue, create(queue, tq, {"command": sh("true")}))["state"] == "completed"
        assert not stale.exists()
        # The task's own log goes once its run is reported: just after, not before, the report.
        helpers.wait_for(lambda: list((work / "logs").iterdir()) == [], what="the logs cleared")
    finally:
        process.stop()


def test_up_s_worker_dies_with_it(sqlite_url: str, tmp_path: Path) -> None:
    up = start_server(sqlite_url, tmp_path / "up", name="up", command="up", extra_args=["--capacity", "1"])
    work_dir = str((tmp_path / "up" / "work").absolute())
    give_up = time.monotonic() + 30
    while subprocess.run(["pgrep", "-f", work_dir], capture_output=True).returncode != 0:
        assert time.monotonic() < give_up, "up started no worker"
        time.sleep(0.1)
    assert up.process is not None
    up.process.kill()
    up.process.wait(timeout=10)
    give_up = time.monotonic() + 30
    while subprocess.run(["pgrep", "-f", work_dir], capture_output=True).returncode == 0:
        assert time.monotonic() < give_up, "the worker outlived taskyard up"
        time.sleep(0.1)
    up.stop()


# One directory, one owner -----------------------------------------------------------------------


def _waiting_task(queue: taskcluster.Queue, task_queue: str, tmp_path: Path) -> tuple[str, Path]:
    """A task that prints half its log, then waits for the file `go` before printing the rest;
    answered once it has started, with that file's path."""
    started, go = tmp_path / "started", tmp_path / "go"
    script = f"echo first half; touch {started}; until [ -e {go} ]; do sleep 0.1; done; echo second half"
    task_id = create(queue, task_queue, {"command": sh(script), "maxRunTime": 600})
    helpers.wait_for(started.exists, what="the task to start", timeout=60)
    return task_id, go


def _outlived(process: subprocess.Popen[bytes], work: Path, task_id: str) -> None:
    """Wait until `process` exits or, if it does not refuse, until it has removed the task's files."""
    own = [work / "tasks" / f"{task_id}-0", work / "logs" / f"{task_id}-0.log"]
    helpers.wait_for(
        lambda: process.poll() is not None or not all(path.exists() for path in own),
        what="the second process to exit",
        timeout=60,
    )


def _completed_with_its_whole_log(server: Server, task_id: str) -> None:
    run = resolved(server.client(), task_id)
    assert (run["state"], run["reasonResolved"]) == ("completed", "completed"), run
    log = log_text(server, task_id)
    lines = log.splitlines()
    assert "first half" in lines and "second half" in lines, log
    assert "=== Task Finished ===" in log


def test_a_second_up_on_the_same_data_directory_refuses_and_harms_nothing(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(request.getfixturevalue("sqlite_template"), data / "taskyard.sqlite3")
    db = f"sqlite:///{data}/taskyard.sqlite3"
    first = start_server(db, data, name="first", command="up", extra_args=["--capacity", "1"])
    second = replace(first, name="second", port=free_port(), log_file=tmp_path / "second.log", process=None)
    serve = replace(second, name="serve", command="serve", extra_args=[], log_file=tmp_path / "serve.log")
    try:
        assert first.process is not None
        task_id, go = _waiting_task(first.client(), "local/default", tmp_path)
        refused = second.launch()
        _outlived(refused, data / "work", task_id)
        go.touch()
        _completed_with_its_whole_log(first, task_id)

        assert refused.wait(timeout=30) == 3
        said = second.log_path.read_text()
        assert f"pid {first.process.pid}" in said and first.root_url in said, said
        assert len(said.strip().splitlines()) <= 2, said
        # A `serve` on the same SQLite data directory is refused the same way.
        assert serve.launch().wait(timeout=30) == 3
        assert f"pid {first.process.pid}" in serve.log_path.read_text()
    finally:
        serve.stop()
        second.stop()
        first.stop()


def test_a_second_worker_on_the_same_work_directory_refuses_and_harms_nothing(
    server: Server, queue: taskcluster.Queue, tq: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    first = WorkerProcess(server, tq, work).start()
    second = WorkerProcess(server, tq, work, name="second", args=["--worker-id", "w2"])
    try:
        assert first.process is not None
        task_id, go = _waiting_task(queue, tq, tmp_path)
        second.start()
        assert second.process is not None
        _outlived(second.process, work, task_id)
        go.touch()
        _completed_with_its_whole_log(server, task_id)

        assert second.wait(timeout=30) == 3
        said = second.log_path.read_text()
        assert f"pid {first.process.pid}" in said and str(work) in said, said
    finally:
        second.stop()
        first.stop()

"""Make the upgrade fixtures: databases written by taskyard's earlier releases themselves.

The upgrade tests (`test_upgrade.py`) open these with today's code, which migrates them, and
check that nothing was lost. They never check out old code: this script does, once, and its
output is committed under `tests/upgrade/fixtures/`. Run it again only to add a release.

For each release in RELEASES, it checks the release's commit out into a temporary git worktree
(`/tmp/ty-old-<commit>`, removed afterwards), then twice, once on a fresh SQLite data directory
and once on a fresh PostgreSQL database:

1. runs that commit's own `taskyard serve`, with this checkout's Python environment and
   `PYTHONPATH=<worktree>/src`, and a fixed TASKYARD_SECRET_KEY and TASKYARD_ROOT_ACCESS_TOKEN;
2. drives it over HTTP with TaskCluster's Python client, in one task group on one task queue:
   a task completed, one failed, one resolved exception, one running (claimed), one pending,
   and one unscheduled that depends on the pending one. Where the release has them, it also
   creates artifacts of every kind on the completed task's run (an s3 one uploaded to the
   local blob store), two roles (one assuming the other) and a client holding the first, and a
   live log of two lines on the running task;
3. records what the old server answered (every task's definition and status, the group's
   members, the artifact lists, expanded scopes, the client's access token) in a manifest;
4. stops the server cleanly (SIGINT) and keeps what it left:

   fixtures/<name>/sqlite/taskyard.sqlite3   the database, checkpointed and VACUUMed
   fixtures/<name>/postgres/dump.sql         `pg_dump --inserts --no-owner --no-privileges`
   fixtures/<name>/<dialect>/artifacts/      the local blob store's files, if any
   fixtures/<name>/<dialect>/manifest.json   what was made, and what the old server answered

Run from the repository root, with PostgreSQL and `pg_dump` at hand:

    .venv/bin/python -m tests.upgrade.make_fixtures [--pg URL] [NAME ...]

`--pg` is a database on the server to use (default: TASKYARD_TEST_POSTGRES, else
postgres://postgres@127.0.0.1:5432/test); a scratch database is created beside it for each
release and dropped afterwards. NAME picks releases from RELEASES (default: all of them).

This script uses nothing of taskyard itself, only the old release's server and TaskCluster's
client, so what it makes does not depend on today's code.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
import taskcluster

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SECRET_KEY = "upgrade-fixtures-secret-key"
ROOT_TOKEN = "upgrade-fixtures-root-access-token"
ROOT_CLIENT_ID = "static/taskyard/root"
TASK_QUEUE_ID = "upgrade/fixture"
WORKER = {"workerGroup": "upgrade", "workerId": "old-release"}
SCHEDULER_ID = "upgrade"


@dataclass(frozen=True)
class Release:
    """A commit whose database schema shipped: `schema` is its newest migration."""

    name: str
    commit: str
    schema: int
    auth: bool  # clients and roles (migration 0003)
    artifacts: bool  # artifacts and the local blob store (migration 0004)
    live_logs: bool  # live logs (migration 0005)


RELEASES = [
    # The first schema: the last commit whose migrations were 0001 alone.
    Release("schema1-ca9d4ad", "ca9d4ad", 1, False, False, False),
    # The release of migrations 0001 to 0004: the last commit before live logs were added.
    Release("schema4-d299541", "d299541", 4, True, True, False),
    # The release of migrations 0001 to 0005: live logs and the worker.
    Release("schema5-c6ea60f", "c6ea60f", 5, True, True, True),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default_pg = os.environ.get("TASKYARD_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--pg", default=default_pg, help="a PostgreSQL database on the server to use")
    parser.add_argument("names", nargs="*", help="releases to make (default: all)")
    args = parser.parse_args(argv)
    wanted = [r for r in RELEASES if not args.names or r.name in args.names]
    if len(wanted) != len(args.names or RELEASES):
        parser.error(f"unknown release; known: {', '.join(r.name for r in RELEASES)}")
    for release in wanted:
        with old_checkout(release.commit) as src:
            out = FIXTURES / release.name
            shutil.rmtree(out, ignore_errors=True)
            make_sqlite(release, src, out / "sqlite")
            make_postgres(release, src, out / "postgres", args.pg)
        print(f"{release.name}: written to {out.relative_to(REPO)}")
    return 0


# ---------------------------------------------------------------------------------------------------
# The old release's code and server.


@contextmanager
def old_checkout(commit: str) -> Iterator[Path]:
    """A temporary worktree of `commit`; yields its `src` directory."""
    full = git("rev-parse", "--verify", f"{commit}^{{commit}}").strip()
    where = Path(tempfile.gettempdir()) / f"ty-old-{full[:7]}"
    created = not where.exists()
    if created:
        git("worktree", "add", "--detach", str(where), full)
    try:
        yield where / "src"
    finally:
        if created:
            git("worktree", "remove", "--force", str(where))


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True, text=True).stdout


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def old_server(src: Path, data_dir: Path, db_url: str) -> Iterator[str]:
    """The old release's `taskyard serve` on `db_url`; yields its root URL; stops it with SIGINT."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKYARD_")}
    env |= {
        "PYTHONPATH": str(src),
        "TASKYARD_SECRET_KEY": SECRET_KEY,
        "TASKYARD_ROOT_ACCESS_TOKEN": ROOT_TOKEN,
        "PYTHONUNBUFFERED": "1",
    }
    command = [sys.executable, "-m", "taskyard.cli.main", "serve", "--port", str(port)]
    command += ["--data-dir", str(data_dir), "--db", db_url]
    data_dir.mkdir(parents=True, exist_ok=True)
    log = (data_dir.parent / f"{data_dir.name}.log").open("wb")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=data_dir)
    root_url = f"http://127.0.0.1:{port}"
    try:
        give_up = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the old server exited with {process.returncode}; see {log.name}")
            try:
                if requests.get(f"{root_url}/api/queue/v1/ping", timeout=2).ok:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > give_up:
                raise RuntimeError(f"the old server did not answer; see {log.name}")
            time.sleep(0.1)
        module = subprocess.run(
            [sys.executable, "-c", "import taskyard; print(taskyard.__file__)"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if not module.startswith(str(src)):
            raise RuntimeError(f"the old server would import taskyard from {module}, not {src}")
        yield root_url
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
    if process.returncode != 0:
        raise RuntimeError(f"the old server stopped with {process.returncode}; see {log.name}")


# ---------------------------------------------------------------------------------------------------
# The two dialects.


def make_sqlite(release: Release, src: Path, out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="ty-fixture-") as tmp:
        data_dir = Path(tmp) / "data"
        database = data_dir / "taskyard.sqlite3"
        with old_server(src, data_dir, f"sqlite:///{database}") as root_url:
            manifest = drive(release, root_url)
        out.mkdir(parents=True)
        conn = sqlite3.connect(database, isolation_level=None)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        shutil.copyfile(database, out / "taskyard.sqlite3")
        keep_blobs(data_dir, out)
        write_manifest(out, release, "sqlite", manifest)


def make_postgres(release: Release, src: Path, out: Path, admin_url: str) -> None:
    name = f"taskyard_fixture_{release.schema}_{uuid.uuid4().hex[:8]}"
    db_url = admin_url.rsplit("/", 1)[0] + "/" + name
    pg_admin(admin_url, f"CREATE DATABASE {name}")
    try:
        with tempfile.TemporaryDirectory(prefix="ty-fixture-") as tmp:
            data_dir = Path(tmp) / "data"
            with old_server(src, data_dir, db_url) as root_url:
                manifest = drive(release, root_url)
            out.mkdir(parents=True)
            dump = subprocess.run(
                ["pg_dump", "--inserts", "--no-owner", "--no-privileges", "--dbname", db_url],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            (out / "dump.sql").write_text(dump)
            keep_blobs(data_dir, out)
            write_manifest(out, release, "postgres", manifest)
    finally:
        pg_admin(admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def pg_admin(url: str, sql: str) -> None:
    import asyncpg

    async def run() -> None:
        conn = await asyncpg.connect(url, timeout=10)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run())


def keep_blobs(data_dir: Path, out: Path) -> None:
    blobs = data_dir / "artifacts"
    if blobs.is_dir():
        shutil.copytree(blobs, out / "artifacts", ignore=shutil.ignore_patterns("*.part"))


def write_manifest(out: Path, release: Release, dialect: str, manifest: dict[str, Any]) -> None:
    head = {
        "release": release.name,
        "commit": git("rev-parse", release.commit).strip(),
        "schema": release.schema,
        "dialect": dialect,
        "secretKey": SECRET_KEY,
        "rootAccessToken": ROOT_TOKEN,
    }
    text = json.dumps(head | manifest, indent=2, sort_keys=True)
    (out / "manifest.json").write_text(text + "\n")


# ---------------------------------------------------------------------------------------------------
# What the old release is asked to do.


def iso(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def drive(release: Release, root_url: str) -> dict[str, Any]:
    """Leave tasks in every state (and the rest the release knows) on the old server."""
    options = {
        "rootUrl": root_url,
        "credentials": {"clientId": ROOT_CLIENT_ID, "accessToken": ROOT_TOKEN},
        "maxRetries": 0,
    }
    queue = taskcluster.Queue(options)
    group = taskcluster.slugId()
    tasks: dict[str, str] = {}

    def create(role: str, **extra: Any) -> str:
        now = datetime.datetime.now(datetime.UTC)
        task_id = taskcluster.slugId()
        body = {
            "taskQueueId": TASK_QUEUE_ID,
            "schedulerId": SCHEDULER_ID,
            "taskGroupId": group,
            "created": iso(now),
            "deadline": iso(now + datetime.timedelta(days=3)),
            "expires": iso(now + datetime.timedelta(days=400)),
            "priority": "high",
            "retries": 1,
            "payload": {"command": [["echo", role]]},
            "metadata": {
                "name": f"upgrade fixture: {role}",
                "description": f"a task left {role} by {release.name}",
                "owner": "upgrade@example.com",
                "source": "https://example.com/taskyard/upgrade",
            },
            **extra,
        }
        queue.createTask(task_id, body)
        tasks[role] = task_id
        return task_id

    def claim(task_id: str) -> int:
        claimed = queue.claimWork(TASK_QUEUE_ID, {**WORKER, "tasks": 1})["tasks"]
        assert [c["status"]["taskId"] for c in claimed] == [task_id], claimed
        return int(claimed[0]["runId"])

    completed = create("completed")
    run_id = claim(completed)
    blobs = make_artifacts(queue, completed, run_id) if release.artifacts else {}
    queue.reportCompleted(completed, str(run_id))

    failed = create("failed")
    queue.reportFailed(failed, str(claim(failed)))

    exception = create("exception")
    queue.reportException(exception, str(claim(exception)), {"reason": "malformed-payload"})

    running = create("running")
    running_run = claim(running)
    live_log = make_live_log(queue, running, running_run) if release.live_logs else None

    pending = create("pending")
    create("unscheduled", dependencies=[pending])

    manifest: dict[str, Any] = {
        "taskGroupId": group,
        "taskQueueId": TASK_QUEUE_ID,
        "worker": WORKER,
        "tasks": tasks,
        "definitions": {role: queue.task(task_id) for role, task_id in tasks.items()},
        "statuses": {role: queue.status(task_id)["status"] for role, task_id in tasks.items()},
        "group": sorted(t["status"]["taskId"] for t in queue.listTaskGroup(group)["tasks"]),
    }
    if release.artifacts:
        manifest["artifacts"] = queue.listArtifacts(completed, str(run_id))["artifacts"]
        manifest["blobs"] = blobs
    if live_log is not None:
        manifest["liveLog"] = live_log
    if release.auth:
        manifest["auth"] = make_auth(options)
    # The instant the old server last acted: the tests run today's queue at this time.
    manifest["made"] = int(time.time() * 1000)
    return manifest


def make_artifacts(queue: taskcluster.Queue, task_id: str, run_id: int) -> dict[str, str]:
    """One artifact of each kind on the run; an s3 one uploaded. Answers {name: bytes as text}."""
    expires = iso(datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=300))
    run = str(run_id)
    blobs = {"public/hello.txt": "hello from an older taskyard\n", "private/upgrade/secret.txt": "shh\n"}
    for name, text in blobs.items():
        body = text.encode()
        created = queue.createArtifact(
            task_id,
            run,
            name,
            {
                "storageType": "s3",
                "contentType": "text/plain",
                "expires": expires,
                "contentLength": len(body),
            },
        )
        put = requests.put(created["putUrl"], data=body, headers={"Content-Type": "text/plain"}, timeout=10)
        put.raise_for_status()
    reference = {
        "storageType": "reference",
        "url": "https://example.com/upgrade/reference",
        "expires": expires,
    }
    queue.createArtifact(task_id, run, "public/reference.html", reference | {"contentType": "text/html"})
    queue.createArtifact(
        task_id,
        run,
        "public/link.txt",
        {"storageType": "link", "artifact": "public/hello.txt", "expires": expires},
    )
    error = {"storageType": "error", "expires": expires, "reason": "file-missing-on-worker"}
    queue.createArtifact(task_id, run, "public/missing.txt", error | {"message": "no such file"})
    return blobs


def make_live_log(queue: taskcluster.Queue, task_id: str, run_id: int) -> dict[str, Any]:
    """Two lines appended to the running run's live log, left open; as the worker appends them."""
    name = "public/logs/live.log"
    offset = 0
    text = ""
    for line in ("first line of a live log\n", "second line, still running\n"):
        route = f"task/{task_id}/runs/{run_id}/live-log/{name}"
        queue._makeHttpRequest("post", route, {"offset": offset, "data": line})
        offset += len(line.encode())
        text += line
    return {"taskId": task_id, "runId": run_id, "name": name, "text": text}


def make_auth(options: dict[str, Any]) -> dict[str, Any]:
    """Two roles, the first assuming the second, and a client holding the first."""
    auth = taskcluster.Auth(options)
    inner = "upgrade-fixture-inner"
    outer = "upgrade-fixture"
    auth.createRole(inner, {"description": "assumed by upgrade-fixture", "scopes": ["queue:route:upgrade.*"]})
    auth.createRole(
        outer,
        {
            "description": "what the upgrade fixture's client may do",
            "scopes": [f"assume:{inner}", "queue:create-task:high:upgrade/*", "queue:scheduler-id:upgrade"],
        },
    )
    client_id = "upgrade-fixture/client"
    expires = iso(datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=365 * 50))
    created = auth.createClient(
        client_id,
        {
            "description": "made by an older taskyard",
            "expires": expires,
            "scopes": [f"assume:{outer}", "auth:current-scopes", "queue:status:*"],
        },
    )
    mine = {"clientId": client_id, "accessToken": created["accessToken"]}
    current = taskcluster.Auth(options | {"credentials": mine}).currentScopes()["scopes"]
    return {
        "clientId": client_id,
        "accessToken": created["accessToken"],
        "client": auth.client(client_id),
        "roles": {role: auth.role(role) for role in (outer, inner)},
        "currentScopes": current,
        "expanded": auth.expandScopes({"scopes": [f"assume:{outer}"]})["scopes"],
    }


if __name__ == "__main__":
    sys.exit(main())

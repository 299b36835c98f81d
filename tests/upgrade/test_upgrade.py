"""Upgrades lose nothing: databases made by earlier releases, opened by today's taskyard.

The fixtures (`fixtures/<release>/<dialect>/`) were written by the old releases' own servers;
`make_fixtures.py` says which commits and how. Each is restored into a scratch database, on
SQLite and on PostgreSQL, and opened by today's code, which migrates it:

- through `open_storage`: every migration is recorded, a second opening applies nothing, the
  old rows keep their recorded versions, and the queue's state is consistent;
- through a real `taskyard serve` and TaskCluster's client: every task reads as the old
  release answered it, the pending task is claimed and completed, the running one reported
  completed, the unscheduled dependent scheduled once its dependency completed, the group
  listed and sealed, the artifacts listed and downloaded, the live log read and appended to,
  the old client authenticates with its old token and its roles expand as before.

The server runs at the instant the fixture was made (see `servers.py`): the old tasks'
deadlines are days after it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import taskcluster

from taskyard.queue import consistency
from taskyard.storage import open_storage
from taskyard.storage.schema import NewerSchema, known_versions
from tests.upgrade import servers
from tests.upgrade.databases import (
    DIALECTS,
    FIXTURES,
    RELEASES,
    OldDatabase,
    execute_raw,
    fetch_raw,
    restored,
)

FIRST_SCHEMA = 1


def _marks(dialect: str) -> list[pytest.MarkDecorator]:
    return [pytest.mark.postgres] if dialect == "postgres" else []


@pytest.fixture(
    params=[pytest.param((r, d), id=f"{r}-{d}", marks=_marks(d)) for r in RELEASES for d in DIALECTS]
)
def old_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OldDatabase]:
    """Each release's database, on each dialect, restored as the old release left it."""
    release, dialect = request.param
    with restored(release, dialect, tmp_path) as old:
        yield old


def test_the_first_schema_is_among_the_fixtures() -> None:
    """The promise is an upgrade from every shipped schema, the very first included."""
    schemas = {int(name.removeprefix("schema").split("-")[0]) for name in RELEASES}
    assert FIRST_SCHEMA in schemas
    assert {1, 4, 5} <= schemas


async def test_every_migration_is_applied_once(old_db: OldDatabase) -> None:
    known = known_versions(old_db.dialect)
    versions_sql = "SELECT version, name, applied FROM schema_migrations ORDER BY version"
    before = await fetch_raw(old_db.db_url, versions_sql)
    assert [v for v, _, _ in before] == [v for v in known if v <= old_db.schema]

    storage = await open_storage(old_db.db_url)
    await storage.close()
    after = await fetch_raw(old_db.db_url, versions_sql)
    assert [(v, n) for v, n, _ in after] == sorted(known.items())
    assert after[: len(before)] == before  # what the old release applied is kept as it was

    again = await open_storage(old_db.db_url)
    try:
        assert await fetch_raw(old_db.db_url, versions_sql) == after
        assert await consistency.problems(again, now=old_db.made) == []
    finally:
        await again.close()


async def test_an_old_database_migrated_by_a_newer_taskyard_is_refused(old_db: OldDatabase) -> None:
    """An old database that a newer taskyard has since migrated: today's refuses to touch it."""
    versions_sql = "SELECT version FROM schema_migrations ORDER BY version"
    future = max(known_versions(old_db.dialect)) + 1
    before = await fetch_raw(old_db.db_url, versions_sql)
    await execute_raw(old_db.db_url, f"INSERT INTO schema_migrations VALUES ({future}, 'from_the_future', 0)")
    with pytest.raises(NewerSchema):
        await open_storage(old_db.db_url)
    assert await fetch_raw(old_db.db_url, versions_sql) == [*before, (future,)]  # nothing applied


async def test_a_database_from_a_newer_taskyard_is_refused(db_url: str) -> None:
    newest = max(known_versions("postgres" if db_url.startswith("postgres") else "sqlite"))
    future = newest + 1
    await execute_raw(db_url, f"INSERT INTO schema_migrations VALUES ({future}, 'from_the_future', 0)")
    with pytest.raises(NewerSchema) as refused:
        await open_storage(db_url)
    assert str(refused.value).count("\n") == 0
    assert f"has schema version {future}, written by a newer taskyard" in str(refused.value)
    assert f"this one knows versions up to {newest}" in str(refused.value)
    versions = await fetch_raw(db_url, "SELECT version FROM schema_migrations ORDER BY version")
    assert versions[-1] == (future,)


# ---------------------------------------------------------------------------------------------------
# Through a real server.


def test_serve_refuses_a_database_from_a_newer_taskyard(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    shutil.copyfile(FIXTURES / RELEASES[-1] / "sqlite" / "taskyard.sqlite3", data_dir / "taskyard.sqlite3")
    future = max(known_versions("sqlite")) + 1
    asyncio.run(
        execute_raw(
            f"sqlite:///{data_dir}/taskyard.sqlite3",
            f"INSERT INTO schema_migrations VALUES ({future}, 'x', 0)",
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKYARD_")}
    refused = subprocess.run(
        [
            str(Path(sys.executable).parent / "taskyard"),
            "serve",
            "--port",
            str(servers.free_port()),
            "--data-dir",
            str(data_dir),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 3, refused.stderr
    line = f"has schema version {future}, written by a newer taskyard"
    assert [text for text in refused.stderr.splitlines() if line in text], refused.stderr


def test_an_old_database_serves_on(old_db: OldDatabase) -> None:
    m = old_db.manifest
    with servers.serve(
        old_db.db_url,
        old_db.data_dir,
        secret_key=m["secretKey"],
        root_token=m["rootAccessToken"],
        at=old_db.made,
    ) as server:
        try:
            check_tasks_read_as_left(server, m)
            if "artifacts" in m:
                check_artifacts(server, m)
            if "liveLog" in m:
                check_live_log(server, m)
            check_tasks_move_on(server, m)
            check_group(server, m)
            if "auth" in m:
                check_old_client_and_roles(server, m)
            check_auth_works(server)
        except BaseException:
            print(server.log())
            raise
    assert server.process.returncode == 0, server.log()
    assert asyncio.run(_problems(old_db.db_url, old_db.made)) == []


async def _problems(db_url: str, now: int) -> list[str]:
    storage = await open_storage(db_url)
    try:
        return await consistency.problems(storage, now=now + 3600 * 1000)
    finally:
        await storage.close()


def test_the_server_runs_at_the_instant_it_is_given(tmp_path: Path) -> None:
    """What keeps an old fixture's tasks claimable however old it grows: the queue's clock moves."""
    ten_days = 10 * 24 * 3600 * 1000
    then = int(time.time() * 1000) - ten_days
    data_dir = tmp_path / "data"
    with servers.serve(
        f"sqlite:///{data_dir}/taskyard.sqlite3", data_dir, secret_key="k", root_token="t", at=then
    ) as server:
        queue = server.queue()
        task_id = taskcluster.slugId()
        created = taskcluster.fromNowJSON(f"-{ten_days // 1000} seconds")
        deadline = taskcluster.fromNowJSON(f"-{ten_days // 1000 - 3600} seconds")
        metadata = {
            "name": "t",
            "description": "d",
            "owner": "o@example.com",
            "source": "https://example.com",
        }
        body = {"taskQueueId": "upgrade/clock", "created": created, "deadline": deadline, "payload": {}}
        assert queue.createTask(task_id, body | {"metadata": metadata})["status"]["state"] == "pending"
        claimed = queue.claimWork("upgrade/clock", {"workerGroup": "g", "workerId": "w", "tasks": 1})["tasks"]
        assert [c["status"]["taskId"] for c in claimed] == [task_id]


def check_tasks_read_as_left(server: servers.Served, m: dict[str, Any]) -> None:
    queue = server.queue()
    for role, task_id in m["tasks"].items():
        assert queue.task(task_id) == m["definitions"][role], role
        assert queue.status(task_id)["status"] == m["statuses"][role], role
        assert m["statuses"][role]["state"] == role


def check_artifacts(server: servers.Served, m: dict[str, Any]) -> None:
    queue = server.queue()
    completed = m["tasks"]["completed"]
    assert queue.listArtifacts(completed, "0")["artifacts"] == m["artifacts"]
    assert queue.listLatestArtifacts(completed)["artifacts"] == m["artifacts"]
    for name, text in m["blobs"].items():
        url = queue.buildSignedUrl("getArtifact", completed, "0", name)
        answer = requests.get(url, timeout=10)
        assert answer.status_code == 200 and answer.text == text, (name, answer.status_code, answer.text)
    linked = requests.get(queue.buildSignedUrl("getArtifact", completed, "0", "public/link.txt"), timeout=10)
    assert linked.text == m["blobs"]["public/hello.txt"]
    reference = queue.buildSignedUrl("getArtifact", completed, "0", "public/reference.html")
    moved = requests.get(reference, timeout=10, allow_redirects=False)
    assert moved.status_code == 303 and moved.headers["location"] == "https://example.com/upgrade/reference"
    missing = requests.get(
        queue.buildSignedUrl("getArtifact", completed, "0", "public/missing.txt"), timeout=10
    )
    assert missing.status_code == 424 and "file-missing-on-worker" in missing.text


def check_live_log(server: servers.Served, m: dict[str, Any]) -> None:
    log = m["liveLog"]
    route = f"task/{log['taskId']}/runs/{log['runId']}/live-log/{log['name']}"
    more = "a line appended after the upgrade\n"
    offset = len(log["text"].encode())
    answer = server.queue()._makeHttpRequest("post", route, {"offset": offset, "data": more, "final": True})
    assert answer["length"] == offset + len(more.encode())
    streamed = requests.get(answer["url"] + "&follow=0", timeout=10)
    assert streamed.status_code == 200 and streamed.text == log["text"] + more


def _claim(queue: taskcluster.Queue, m: dict[str, Any]) -> list[dict[str, Any]]:
    claimed: list[dict[str, Any]] = queue.claimWork(m["taskQueueId"], {**m["worker"], "tasks": 4})["tasks"]
    return claimed


def check_tasks_move_on(server: servers.Served, m: dict[str, Any]) -> None:
    queue = server.queue()
    tasks = m["tasks"]
    # The pending task is in the claim index, and is the only task there.
    claimed = _claim(queue, m)
    assert [c["status"]["taskId"] for c in claimed] == [tasks["pending"]]
    assert claimed[0]["runId"] == 0
    # The running one keeps its claim: it is reclaimed, then reported completed.
    running_run = str(m["statuses"]["running"]["runs"][-1]["runId"])
    queue.reclaimTask(tasks["running"], running_run)
    assert queue.reportCompleted(tasks["running"], running_run)["status"]["state"] == "completed"
    # Completing the dependency schedules its dependent.
    assert queue.status(tasks["unscheduled"])["status"]["state"] == "unscheduled"
    dependents = queue.listDependentTasks(tasks["pending"])["tasks"]
    assert [d["status"]["taskId"] for d in dependents] == [tasks["unscheduled"]]
    queue.reportCompleted(tasks["pending"], "0")
    scheduled = _until(lambda: queue.status(tasks["unscheduled"])["status"]["state"] == "pending")
    assert scheduled, queue.status(tasks["unscheduled"])
    claimed = _claim(queue, m)
    assert [c["status"]["taskId"] for c in claimed] == [tasks["unscheduled"]]
    queue.reportFailed(tasks["unscheduled"], "0")
    # The resolved ones can run again.
    for role in ("completed", "failed", "exception"):
        rerun = queue.rerunTask(tasks[role])["status"]
        assert rerun["state"] == "pending" and len(rerun["runs"]) == len(m["statuses"][role]["runs"]) + 1
    claimed = _claim(queue, m)
    assert sorted(c["status"]["taskId"] for c in claimed) == sorted(
        tasks[r] for r in ("completed", "failed", "exception")
    )
    for c in claimed:
        queue.reportCompleted(c["status"]["taskId"], str(c["runId"]))


def check_group(server: servers.Served, m: dict[str, Any]) -> None:
    queue = server.queue()
    group = m["taskGroupId"]
    listed = queue.listTaskGroup(group)
    assert sorted(t["status"]["taskId"] for t in listed["tasks"]) == m["group"]
    assert {t["status"]["state"] for t in listed["tasks"]} == {"completed", "failed"}
    assert "sealed" not in queue.getTaskGroup(group)
    sealed = queue.sealTaskGroup(group)
    assert sealed["taskGroupId"] == group and "sealed" in sealed
    assert queue.getTaskGroup(group)["sealed"] == sealed["sealed"]


def check_old_client_and_roles(server: servers.Served, m: dict[str, Any]) -> None:
    auth = m["auth"]
    mine = {"clientId": auth["clientId"], "accessToken": auth["accessToken"]}
    assert server.auth(mine).currentScopes()["scopes"] == auth["currentScopes"]
    assert server.queue(mine).status(m["tasks"]["completed"])["status"]["taskId"] == m["tasks"]["completed"]
    wrong = {**mine, "accessToken": auth["accessToken"][:-2] + "xx"}
    with pytest.raises(taskcluster.TaskclusterAuthFailure):
        server.auth(wrong).currentScopes()
    root = server.auth()
    client = root.client(auth["clientId"])
    for key in ("clientId", "description", "expires", "scopes", "expandedScopes", "created", "disabled"):
        assert client[key] == auth["client"][key], key
    for role_id, role in auth["roles"].items():
        assert root.role(role_id) == role
    assert root.expandScopes({"scopes": ["assume:upgrade-fixture"]})["scopes"] == auth["expanded"]


def check_auth_works(server: servers.Served) -> None:
    """Today's auth on the old database: clients are made, and the anonymous role is there."""
    root = server.auth()
    assert root.role("anonymous")["scopes"] == ["queue:get-artifact:public/*"]
    made = root.createClient(
        "upgrade/after",
        {
            "description": "made after the upgrade",
            "expires": "3000-01-01T00:00:00.000Z",
            "scopes": ["auth:*"],
        },
    )
    fresh = {"clientId": "upgrade/after", "accessToken": made["accessToken"]}
    assert "auth:*" in server.auth(fresh).currentScopes()["scopes"]


def _until(condition: Any, attempts: int = 200) -> bool:
    for _ in range(attempts):
        if condition():
            return True
        time.sleep(0.05)
    return False

"""The index service through TaskCluster's own `taskcluster.Index` client, against `taskyard serve`
on SQLite and PostgreSQL: inserts and ranks, finds, lists and their paging, bad input, scopes,
findArtifactFromTask's 303, and tasks indexed from their routes when they complete (and only
then), also when the server is killed between the completion and the indexing."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
import taskcluster

from tests.e2e.conftest import Server, start_server
from tests.e2e.faults import Lives, db_rows
from tests.e2e.helpers import (
    _find,
    claim_one,
    create,
    iso,
    now,
    refused,
    signed,
    slug,
    task_queue_id,
    wait_for,
)


def later(**delta: float) -> str:
    return iso(now() + timedelta(**delta))


@pytest.fixture(scope="module")
def index(server: Server) -> taskcluster.Index:
    return taskcluster.Index(server.options())


def ns() -> str:
    """A namespace of this test alone."""
    return f"t{slug()[:8].lower().replace('-', 'x').replace('_', 'y')}"


def entry(
    task_id: str, rank: float = 0, data: dict[str, Any] | None = None, **expiry: float
) -> dict[str, Any]:
    return {"taskId": task_id, "rank": rank, "data": data or {}, "expires": later(**(expiry or {"days": 1}))}


def test_ping(index: taskcluster.Index) -> None:
    assert index.ping()["alive"] is True


def test_insert_then_find_echoes_the_full_path(index: taskcluster.Index) -> None:
    path, task_id = f"{ns()}.a.b.build", slug()
    stored = index.insertTask(path, entry(task_id, 5, {"k": [1, "v"]}))
    assert stored["namespace"] == path and stored["taskId"] == task_id and stored["rank"] == 5
    found = index.findTask(path)
    assert found == stored and found["data"] == {"k": [1, "v"]}
    with refused(404, "ResourceNotFound"):
        index.findTask(f"{path}.missing")
    assert index.deleteTask(path) == {} and index.deleteTask(path) == {}  # also when gone
    with refused(404, "ResourceNotFound"):
        index.findTask(path)
    assert index.listNamespaces(path.rsplit(".", 1)[0])["namespaces"] == []  # namespaces stay
    assert [n["name"] for n in index.listNamespaces(path.split(".")[0])["namespaces"]] == ["a"]


def test_a_lower_rank_never_replaces_a_higher_one(index: taskcluster.Index) -> None:
    path, first, second, third = f"{ns()}.x", slug(), slug(), slug()
    index.insertTask(path, entry(first, 10))
    kept = index.insertTask(path, entry(second, 9))
    assert kept["taskId"] == first and kept["rank"] == 10  # answers the entry that stays
    assert index.insertTask(path, entry(third, 10))["taskId"] == third  # equal rank: the newer wins
    assert index.insertTask(path, entry(second, 11))["taskId"] == second
    assert index.findTask(path)["taskId"] == second


def test_an_expired_entry_is_gone_and_does_not_hold_its_rank(index: taskcluster.Index) -> None:
    path = f"{ns()}.old"
    index.insertTask(path, entry(slug(), 100, seconds=-5))
    with refused(404, "ResourceNotFound"):
        index.findTask(path)
    fresh = slug()
    assert index.insertTask(path, entry(fresh, 1))["taskId"] == fresh


def test_listing_namespaces_and_tasks_pages_by_token(index: taskcluster.Index) -> None:
    root = ns()
    for i in range(5):
        index.insertTask(f"{root}.group{i}.leaf", entry(slug()))
        index.insertTask(f"{root}.task{i}", entry(slug(), i))
    top = index.listNamespaces("")
    assert root in [n["name"] for n in top["namespaces"]]
    names, token, pages = [], None, 0
    while True:
        query = {"limit": 2, **({"continuationToken": token} if token else {})}
        page = index.listNamespaces(root, query=query)
        names += [(n["namespace"], n["name"]) for n in page["namespaces"]]
        pages += 1
        token = page.get("continuationToken")
        if not token:
            break
    assert names == [(f"{root}.group{i}", f"group{i}") for i in range(5)] and pages == 3
    tasks: list[dict[str, Any]] = []
    token = None
    while True:
        query = {"limit": 3, **({"continuationToken": token} if token else {})}
        page = index.listTasks(root, query=query)
        tasks += page["tasks"]
        token = page.get("continuationToken")
        if not token:
            break
    assert [t["namespace"] for t in tasks] == [f"{root}.task{i}" for i in range(5)]
    assert [t["rank"] for t in tasks] == [0, 1, 2, 3, 4]
    with refused(400):
        index.listTasks(root, query={"continuationToken": "junk!"})


def test_find_tasks_at_index_echoes_each_path_and_skips_unknown_ones(index: taskcluster.Index) -> None:
    root = ns()
    ids = {f"{root}.a.one": slug(), f"{root}.b.two": slug()}
    for path, task_id in ids.items():
        index.insertTask(path, entry(task_id))
    asked = [f"{root}.a.one", f"{root}.nothing.here", f"{root}.b.two", "nodot"]
    found = index.findTasksAtIndex({"indexes": asked})
    assert {t["namespace"]: t["taskId"] for t in found["tasks"]} == ids
    paged = index.findTasksAtIndex(payload={"indexes": asked}, query={"limit": 1})
    assert [t["namespace"] for t in paged["tasks"]] == [f"{root}.a.one"] and "continuationToken" in paged


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("a..b", None, "namespace"),
        ("a b", None, "namespace"),
        ("x" * 256, None, "namespace"),
        ("ok.path", {"taskId": "nope", "rank": 0, "data": {}, "expires": later(days=1)}, "taskId"),
        ("ok.path", {"taskId": slug(), "rank": "high", "data": {}, "expires": later(days=1)}, "rank"),
        ("ok.path", {"taskId": slug(), "rank": 1.5, "data": {}, "expires": later(days=1)}, "rank"),
        ("ok.path", {"taskId": slug(), "rank": 0, "data": [], "expires": later(days=1)}, "data"),
        ("ok.path", {"taskId": slug(), "rank": 0, "data": {}, "expires": "soon"}, "expires"),
        ("ok.path", {"taskId": slug(), "rank": 0, "data": {}}, "expires"),
        ("ok.path", {"taskId": slug(), "rank": 0, "data": {}, "expires": later(days=1), "x": 1}, "x"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(
    index: taskcluster.Index, path: str, body: dict[str, Any] | None, field: str
) -> None:
    with refused(400) as info:
        index.insertTask(path, body or entry(slug()))
    assert field in info.value.body["message"], info.value.body


def test_malformed_json_is_a_400(server: Server) -> None:
    url = f"{server.root_url}/api/index/v1/task/ok.path"
    reply = signed("PUT", url, None, server.credentials, raw="{not json")
    assert reply.status_code == 400 and reply.json()["code"] == "MalformedPayload"


def test_scopes_as_taskcluster_has_them(server: Server) -> None:
    root = ns()
    taskcluster.Index(server.options()).insertTask(f"{root}.mine.x", entry(slug()))
    creds = taskcluster.createTemporaryCredentials(
        server.credentials["clientId"],
        server.credentials["accessToken"],
        now() - timedelta(minutes=1),
        now() + timedelta(minutes=10),
        [f"index:find-task:{root}.mine.*", f"index:insert-task:{root}.mine.*"],
    )
    limited = taskcluster.Index(server.options(creds))
    assert limited.findTask(f"{root}.mine.x")
    limited.insertTask(f"{root}.mine.y", entry(slug()))
    with refused(403, "InsufficientScopes"):
        limited.findTask(f"{root}.other.x")
    with refused(403, "InsufficientScopes"):
        limited.insertTask(f"{root}.other.y", entry(slug()))
    with refused(403, "InsufficientScopes"):
        limited.listNamespaces(root)


def complete(queue: taskcluster.Queue, tq: str, routes: list[str], **overrides: Any) -> str:
    task_id = create(queue, tq, routes=routes, **overrides)
    claim_one(queue, tq)
    queue.reportCompleted(task_id, 0)
    return task_id


def test_a_completed_task_is_indexed_under_its_routes(
    index: taskcluster.Index, queue: taskcluster.Queue, tq: str
) -> None:
    root = ns()
    extra = {"index": {"rank": 7, "data": {"from": "extra"}}}
    task_id = complete(
        queue, tq, [f"index.{root}.a.latest", f"index.{root}.b.v1", "other.route"], extra=extra
    )
    found = wait_for(lambda: _find(index, f"{root}.a.latest"), what="the task indexed")
    assert found["taskId"] == task_id and found["rank"] == 7 and found["data"] == {"from": "extra"}
    assert index.findTask(f"{root}.b.v1")["taskId"] == task_id
    # An earlier task of a lower rank does not replace it.
    complete(queue, tq, [f"index.{root}.a.latest"], extra={"index": {"rank": 3}})
    failed = create(queue, tq, routes=[f"index.{root}.failed"])
    claim_one(queue, tq)
    queue.reportFailed(failed, 0)
    marker = complete(queue, tq, [f"index.{root}.marker"])
    wait_for(lambda: _find(index, f"{root}.marker"), what="a later task indexed")
    assert index.findTask(f"{root}.a.latest")["taskId"] == task_id
    assert _find(index, f"{root}.failed") is None  # failed tasks are never indexed
    assert marker


def test_find_artifact_from_task_is_a_303_to_the_artifact(
    server: Server, index: taskcluster.Index, queue: taskcluster.Queue, tq: str
) -> None:
    root = ns()
    task_id = create(queue, tq)
    claim_one(queue, tq)
    body = {"storageType": "s3", "contentType": "text/plain", "expires": later(days=1)}
    put = queue.createArtifact(task_id, 0, "public/build/log.txt", body)["putUrl"]
    assert requests.put(put, data=b"hello\n", headers={"Content-Type": "text/plain"}, timeout=30).ok
    queue.reportCompleted(task_id, 0)
    index.insertTask(f"{root}.latest", entry(task_id))
    answer = index.findArtifactFromTask(f"{root}.latest", "public/build/log.txt")
    response = answer[
        "response"
    ]  # not JSON: TaskCluster's client hands back the response, as taskgraph reads it
    assert 300 <= response.status_code < 400
    assert requests.get(response.headers["Location"], timeout=30).content == b"hello\n"
    with refused(404, "ResourceNotFound"):
        index.findArtifactFromTask(f"{root}.nothing", "public/build/log.txt")
    anonymous = taskcluster.Index(server.options({}))
    with refused(403, "InsufficientScopes"):
        anonymous.findArtifactFromTask(f"{root}.latest", "private/secret")


@pytest.fixture
def lives(db_url: str, tmp_path: Path) -> Iterator[Lives]:
    with Lives(start_server(db_url, tmp_path / "server", name="indexed")).running() as running:
        yield running


def test_a_task_completed_just_before_a_kill_is_indexed_after_the_restart(lives: Lives, db_url: str) -> None:
    """On PostgreSQL the indexer is held (the test locks its cursor) while the task completes and
    the server is killed; on SQLite, whose one writer cannot be held apart, the killed database is
    put back to where a kill before indexing leaves it (entries gone, cursor at the start)."""
    server = lives.current
    queue, root, tq = server.client(), ns(), task_queue_id("index-kill")
    held = None if db_url.startswith("sqlite") else _hold_cursor(db_url)
    try:
        task_id = complete(queue, tq, [f"index.{root}.survives"])
        wait_for(lambda: _logged_completions(db_url), what="the completion published")
        lives.kill()
    finally:
        if held is not None:
            held.set()
    if held is None:
        with contextlib.closing(sqlite3.connect(db_url.removeprefix("sqlite:///"))) as db, db:
            db.execute("DELETE FROM indexed_tasks")
            db.execute("DELETE FROM index_namespaces")
            db.execute("UPDATE index_cursor SET through = 0")
    assert _indexed(db_url) == []  # not indexed before the kill
    lives.restart()
    index = taskcluster.Index(lives.current.options())
    found = wait_for(lambda: _find(index, f"{root}.survives"), what="the task indexed after the restart")
    assert found["taskId"] == task_id


def _indexed(db_url: str) -> list[tuple[Any, ...]]:
    return db_rows(db_url, "SELECT task_id FROM indexed_tasks", "SELECT task_id FROM indexed_tasks")


def _logged_completions(db_url: str) -> int:
    sql = (
        "SELECT COUNT(*) FROM event_log l JOIN outbox o ON o.id = l.event WHERE o.exchange = 'task-completed'"
    )
    return int(db_rows(db_url, sql, sql)[0][0])


def _hold_cursor(db_url: str) -> threading.Event:
    """Lock the indexer's cursor row from another connection until the event returned is set."""
    import asyncio

    import asyncpg

    release, locked = threading.Event(), threading.Event()

    async def hold() -> None:
        conn = await asyncpg.connect(db_url, timeout=10)
        try:
            async with conn.transaction():
                await conn.execute("SELECT through FROM index_cursor FOR UPDATE")
                locked.set()
                await asyncio.to_thread(release.wait, 60)
        finally:
            await conn.close()

    threading.Thread(target=lambda: asyncio.run(hold()), daemon=True).start()
    assert locked.wait(10)
    return release

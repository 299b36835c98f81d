"""The artifact API's operations: create, follow links, answer content URLs, list and sweep.

createArtifact runs in one transaction with the task row (locked on PostgreSQL), so an artifact
never lands on a run that a concurrent report has just resolved past its window.

An s3 artifact's upload URL carries a token that createArtifact stores with it. On the local
store, whose URLs the API serves, a PUT is checked against it before the body is read and
recorded, again with the task row locked, before the blob replaces any other: the URL writes
once, never after its run is resolved, and a newer createArtifact replaces it. S3 sees none of
this; its URLs are only short-lived.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import replace
from typing import NotRequired, TypedDict

import orjson

from taskyard.artifacts.port import BlobStore
from taskyard.model import artifacts, dates, paging
from taskyard.model.artifacts import Artifact, ArtifactInfo, StorageType
from taskyard.model.errors import (
    InputError,
    InputTooLarge,
    InvalidRequestArguments,
    ResourceExpired,
    ResourceNotFound,
    Unavailable,
)
from taskyard.model.guard import Guard
from taskyard.model.messages import task_message
from taskyard.model.status import RunStatus
from taskyard.queue import service
from taskyard.queue.service import Queue
from taskyard.storage.port import Row, Session, Tx

log = logging.getLogger(__name__)
SWEEP_BATCH = 500
UPLOAD_TOKEN_BYTES = 18
EXPIRY_GRACE_MS = 30 * 60 * 1000


class Created(TypedDict):
    """createArtifact's answer: s3 artifacts add where and until when to upload."""

    storageType: StorageType
    contentType: NotRequired[str]
    expires: NotRequired[str]
    putUrl: NotRequired[str]


class Content(TypedDict):
    """Where an artifact's content is: a URL, or for an error artifact its reason and message."""

    storageType: StorageType
    url: NotRequired[str]
    reason: NotRequired[str]
    message: NotRequired[str]


class ArtifactList(paging.Page):
    artifacts: list[ArtifactInfo]


def blobs(q: Queue) -> BlobStore:
    store: BlobStore | None = q.blobs
    if store is None:
        raise Unavailable("this deployment has no blob store for s3 artifacts")
    return store


def _from_row(row: Row) -> Artifact:
    return Artifact(
        task_id=row["task_id"],
        run_id=row["run_id"],
        name=row["name"],
        storage_type=row["storage_type"],
        content_type=row["content_type"],
        expires=row["expires"],
        details=orjson.loads(row["details"]),
        present=bool(row["present"]),
        upload_token=row["upload_token"],
    )


async def create_artifact(q: Queue, task_id: str, run_id: int, name: str, body: object) -> Created:
    """Create or re-create an artifact (idempotent for an identical body); 400/409: docs/protocol.md."""
    artifacts.check_name(name)
    new = artifacts.from_request(task_id, run_id, name, body, q.clock())
    declared = new.details.get("contentLength")
    if new.storage_type == "s3" and isinstance(declared, int) and declared > blobs(q).max_bytes:
        raise InputTooLarge(
            f"body.contentLength is {declared} bytes; this deployment's artifacts are at most "
            f"{blobs(q).max_bytes} bytes"
        )
    async with q.storage.transaction() as tx:
        stored = await create_artifact_tx(q, tx, new)
    return _created(q, stored)


async def create_artifact_tx(q: Queue, tx: Tx, new: Artifact) -> Artifact:
    """Store `new` in `tx` (locking the task row), announcing it; answer what was stored.

    Runs inside the caller's transaction so another change (a live log's first append) and its
    artifact commit together or not at all.
    """
    task_id, run_id = new.task_id, new.run_id
    row = await tx.fetchrow("get_task_and_artifact_for_update", task_id, run_id, new.name)
    if row is None:
        raise InputError(f"task {task_id} does not exist")
    rec = service.record_from_row(row)
    run = rec.runs[run_id] if run_id < len(rec.runs) else None
    artifacts.check_run_accepts(run, q.clock())
    assert run is not None
    artifacts.check_expires(new, rec.expires)
    old = _joined_artifact(row, new)
    stored = new if old is None else artifacts.recreate(old, new)
    if stored.storage_type == "s3":  # a new URL to upload with, replacing any earlier one
        stored = replace(stored, upload_token=secrets.token_urlsafe(UPLOAD_TOKEN_BYTES))
    await tx.execute(
        "put_artifact",
        task_id=task_id,
        run_id=run_id,
        artifact_name=new.name,
        storage_type=stored.storage_type,
        content_type=stored.content_type,
        expires=stored.expires,
        details=service.dumps(stored.details),
        present=True,
        upload_token=stored.upload_token,
    )
    if stored.storage_type != "s3":  # s3 uploads happen later, elsewhere: TaskCluster announces none
        worker = (run["workerGroup"], run["workerId"])
        extra = {"artifact": _announced(stored)}
        message = task_message(
            "artifact-created", rec.status(), rec.definition, run_id=run_id, worker=worker, extra=extra
        )
        await service.publish_tx(q, tx, [message])
    return stored


def _joined_artifact(row: Row, new: Artifact) -> Artifact | None:
    """The stored artifact `new` would replace, from its `artifact_*` columns joined to the task row."""
    if row["artifact_storage_type"] is None:
        return None
    return Artifact(
        task_id=new.task_id,
        run_id=new.run_id,
        name=new.name,
        storage_type=row["artifact_storage_type"],
        content_type=row["artifact_content_type"],
        expires=row["artifact_expires"],
        details=orjson.loads(row["artifact_details"]),
        present=bool(row["artifact_present"]),
        upload_token=row["artifact_upload_token"],
    )


def _announced(a: Artifact) -> ArtifactInfo:
    info = a.info()
    info.pop("contentLength", None)
    return info


def _created(q: Queue, a: Artifact) -> Created:
    if a.storage_type != "s3":
        return {"storageType": a.storage_type}
    store = blobs(q)
    url_expires = q.clock() + store.put_url_ttl_ms
    assert a.upload_token is not None
    put_url = store.put_url(
        a.blob_key,
        content_type=a.content_type,
        content_encoding=a.declared_encoding,
        expires=url_expires,
        token=a.upload_token,
    )
    return {
        "storageType": "s3",
        "contentType": a.content_type,
        "expires": dates.to_iso(url_expires),
        "putUrl": put_url,
    }


async def check_upload(q: Queue, task_id: str, run_id: int, name: str, token: str) -> None:
    """UploadRefused (403) unless a PUT with upload `token` may write the artifact's blob now.

    Answered before the body is read; `record_upload` decides again once it has been.
    """
    async with q.storage.reader() as session:
        row = await session.fetchrow("get_artifact_with_runs", task_id, run_id, name)
    runs = None if row is None else row["task_runs"]
    run = _run(runs, run_id)
    artifacts.check_upload(None if row is None else _from_row(row), token, run, q.clock())


async def record_upload(q: Queue, task_id: str, run_id: int, name: str, token: str) -> None:
    """Close the upload `token` opened, once its bytes are stored; UploadRefused if it can't be.

    The task row is locked (PostgreSQL) and the token cleared only if it is still there, so of
    two PUTs racing with one URL a single one is recorded, and none once the run is resolved.
    The update checks the token itself: the artifact is read only to say why it refused.
    """
    async with q.storage.transaction() as tx:
        task = await tx.fetchrow("get_task_for_update", task_id)
        run = _run(None if task is None else task["runs"], run_id)
        taken = artifacts.run_takes_uploads(run, q.clock())
        if taken and await tx.execute("finish_upload", task_id, run_id, name, token) == 1:
            return
        row = await tx.fetchrow("get_artifact", task_id, run_id, name)
        artifacts.check_upload(None if row is None else _from_row(row), token, run, q.clock())
        raise artifacts.UploadRefused(f"another upload of artifact {name} was recorded first")


def _run(runs: str | None, run_id: int) -> RunStatus | None:
    """Run `run_id` of a task's runs (as stored: JSON text), or None if the task or run is missing."""
    found: list[RunStatus] = [] if runs is None else orjson.loads(runs)
    return found[run_id] if run_id < len(found) else None


async def finish_artifact(q: Queue, task_id: str, run_id: int, name: str) -> None:
    """Only `object` artifacts are finished, and taskyard has none yet: 404, or 400 for the rest."""
    async with q.storage.reader() as session:
        row = await session.fetchrow("get_artifact", task_id, run_id, name)
    if row is None:
        raise ResourceNotFound("Artifact not found")
    raise InputError("Only object artifacts can be finished")


async def latest_run_id(q: Queue, task_id: str) -> int:
    """The task's last run; 404 if the task does not exist or has no runs."""
    async with q.storage.reader() as session:
        return await _latest_run_id(session, task_id)


async def _latest_run_id(session: Session, task_id: str) -> int:
    row = await session.fetchrow("get_task", task_id)
    if row is None:
        raise ResourceNotFound(f"task {task_id} does not exist")
    runs = service.record_from_row(row).runs
    if not runs:
        raise ResourceNotFound(f"task {task_id} has no runs")
    return len(runs) - 1


async def _get(session: Session, task_id: str, run_id: int, name: str) -> Artifact:
    row = await session.fetchrow("get_artifact", task_id, run_id, name)
    if row is None or not row["present"]:
        raise ResourceNotFound("Artifact not found")
    return _from_row(row)


async def _get_latest(session: Session, task_id: str, name: str) -> Artifact:
    """The artifact `name` of the task's latest run: one read when it is there."""
    row = await session.fetchrow("get_latest_artifact", task_id, name)
    if row is not None and row["present"]:
        return _from_row(row)
    return await _get(session, task_id, await _latest_run_id(session, task_id), name)


async def info(q: Queue, task_id: str, run_id: int, name: str) -> ArtifactInfo:
    """artifactInfo: the artifact itself, links not followed."""
    async with q.storage.reader() as session:
        return (await _get(session, task_id, run_id, name)).info()


async def follow(q: Queue, task_id: str, run_id: int | None, name: str, *, guard: Guard) -> Artifact:
    """The artifact `name` of run `run_id` (None: the latest run) leads to through links.

    `guard` sees `names`, every name on the way so far (AllOf): first the one asked for, before
    the name is checked (400) or anything is looked up (404), as TaskCluster does.
    """
    chain = [name]
    guard(names=chain)
    artifacts.check_name(name, "URL parameter name", InvalidRequestArguments)
    async with q.storage.reader() as session:
        if run_id is None:
            found = await _get_latest(session, task_id, name)
            run_id = found.run_id
        else:
            found = await _get(session, task_id, run_id, name)
        while found.storage_type == "link":
            target = str(found.details["artifact"])
            if target in chain or len(chain) > artifacts.MAX_LINKS:
                raise InputError(f"artifact {name} is part of a link cycle: {' -> '.join([*chain, target])}")
            chain = [*chain, target]  # a new list: the guard may keep what it was given
            guard(names=chain)
            found = await _get(session, task_id, run_id, target)
    if found.expires < q.clock():
        raise ResourceExpired(f"artifact {found.name} expired at {dates.to_iso(found.expires)}")
    return found


def content(q: Queue, a: Artifact) -> Content:
    """Where the artifact's content is: `{storageType, url}`, or the error's reason and message."""
    if a.storage_type == "error":
        return {
            "storageType": "error",
            "reason": str(a.details["reason"]),
            "message": str(a.details["message"]),
        }
    if a.storage_type == "reference":
        return {"storageType": "reference", "url": str(a.details["url"])}
    url = blobs(q).get_url(a.blob_key, q.clock() + artifacts.GET_URL_TTL_MS)
    return {"storageType": "s3", "url": url}


async def list_artifacts(q: Queue, task_id: str, run_id: int | None, page: paging.Query) -> ArtifactList:
    """One page of the run's artifacts by name (the latest run when `run_id` is None)."""
    rec = await service.load(q, task_id)
    last = len(rec.runs) - 1
    run_id = last if run_id is None else run_id
    if not 0 <= run_id <= last:
        raise ResourceNotFound(f"task {task_id} has no run {run_id}")
    (after,) = paging.after(page, 1, [""])
    async with q.storage.reader() as session:
        rows = await session.fetch("list_artifacts", task_id, run_id, after, page.limit + 1)
    found = [_from_row(r) for r in rows]
    last_key: list[object] | None = [found[page.limit - 1].name] if len(found) > page.limit else None
    infos = [a.info() for a in found[: page.limit]]
    return {"artifacts": infos, **paging.more(paging.keyset_token(found, last_key, page.limit))}


async def sweep_expired(q: Queue) -> int:
    """Delete artifacts that expired more than 30 minutes ago, with their blobs; answer how many.

    An artifact whose blob can't be deleted is set aside: its row stays, so its blob is not
    forgotten, and it is tried again later.
    """
    held = service.held(q, service.EXPIRY_SWEEPER)
    async with q.storage.reader() as session:
        found = await session.fetch("expired_artifacts", q.clock() - EXPIRY_GRACE_MS, SWEEP_BATCH + len(held))
    rows = await _delete_blobs(q, [r for r in found if _sweep_key(r) not in held][:SWEEP_BATCH])
    async with q.storage.transaction() as tx:
        for r in rows:
            await tx.execute("delete_artifact", r["task_id"], r["run_id"], r["name"])
    return len(rows)


def _sweep_key(row: Row) -> str:
    return f"artifact {row['task_id']}/{row['run_id']}/{row['name']}"


async def _delete_blobs(q: Queue, rows: list[Row]) -> list[Row]:
    """Delete the blobs of these rows' s3 artifacts; answer the rows whose blobs are gone.

    All at once first; if that fails, one at a time, setting aside each that fails again.
    """
    keys = [f"{r['task_id']}/{r['run_id']}/{r['name']}" for r in rows if r["storage_type"] == "s3"]
    try:
        if keys:
            await blobs(q).delete(keys)
        return rows
    except Exception:
        log.warning("deleting %d expired blobs failed; deleting them one at a time", len(keys), exc_info=True)
    gone = []
    for r in rows:
        try:
            if r["storage_type"] == "s3":
                await blobs(q).delete([f"{r['task_id']}/{r['run_id']}/{r['name']}"])
        except Exception as exc:
            service.set_aside(q, service.EXPIRY_SWEEPER, _sweep_key(r), r["task_id"], exc)
            continue
        q.set_aside[service.EXPIRY_SWEEPER].release(_sweep_key(r))
        gone.append(r)
    return gone

"""Live logs through the queue service, on every backend: appends, retries, limits, followers, sweep."""

from __future__ import annotations

import asyncio
import dataclasses
from urllib.parse import parse_qsl, urlsplit

import pytest

from taskyard.config import QueueConfig
from taskyard.model import dates
from taskyard.model.errors import (
    InputTooLarge,
    InputValidationError,
    RequestConflict,
    ResourceNotFound,
)
from taskyard.model.guard import ALLOW_ALL
from taskyard.model.signed_urls import BadSignature
from taskyard.queue import artifacts, claims, livelogs, resolvers, tasks
from taskyard.queue.service import Queue
from taskyard.storage import open_storage
from tests.conftest import QUEUE_ISSUER, FakeClock, Published, until
from tests.queue.helpers import definition, new_id

TQ = "test-prov/test-worker"
ROOT_URL = "http://taskyard.example"
NAME = "public/logs/live.log"


@pytest.fixture
def live_log_urls() -> livelogs.StreamUrls:
    return livelogs.StreamUrls(ROOT_URL + "/", "livelog-tests")


@pytest.fixture
def q(queue: Queue) -> Queue:
    return queue


async def running_task(q: Queue, clock: FakeClock) -> str:
    task_id = new_id()
    await tasks.create_task(q, task_id, definition(clock.now), guard=ALLOW_ALL)
    (claim,) = await claims.claim_pending(q, TQ, ("wg", "w1"), 1)
    assert claim["status"]["taskId"] == task_id
    return task_id


async def append(
    q: Queue, task_id: str, offset: int, data: str, *, final: bool = False, name: str = NAME
) -> int:
    body = {"offset": offset, "data": data, **({"final": True} if final else {})}
    answer = await livelogs.append(q, task_id, 0, name, body)
    return int(answer["length"])


async def text(q: Queue, task_id: str, run_id: int = 0) -> str:
    gone = asyncio.Event()
    chunks = livelogs.follow(q, task_id, run_id, keep_following=False, gone=gone)
    return b"".join([c async for c in chunks]).decode()


async def test_first_append_creates_the_reference_artifact(
    q: Queue, clock: FakeClock, published: Published
) -> None:
    task_id = await running_task(q, clock)
    await published.collect()
    answer = await livelogs.append(q, task_id, 0, NAME, {"offset": 0, "data": "hello\n"})
    assert answer["length"] == 6
    url = urlsplit(answer["url"])
    assert f"{url.scheme}://{url.netloc}{url.path}" == f"{ROOT_URL}/api/queue/v1/_livelog/{task_id}/0"
    expires = dates.parse_iso((await tasks.task(q, task_id))["deadline"]) + 15 * 60 * 1000
    assert dict(parse_qsl(url.query))["e"] == str(expires)
    livelogs.verify_url(q, task_id, "0", dict(parse_qsl(url.query)))
    with pytest.raises(BadSignature):
        livelogs.verify_url(q, task_id, "1", dict(parse_qsl(url.query)))

    info = await artifacts.info(q, task_id, 0, NAME)
    assert info == {
        "storageType": "reference",
        "name": NAME,
        "expires": dates.to_iso(expires),
        "contentType": "text/plain; charset=utf-8",
    }
    found = await artifacts.follow(q, task_id, 0, NAME, guard=ALLOW_ALL)
    assert artifacts.content(q, found) == {"storageType": "reference", "url": answer["url"]}
    (created,) = await published.collect()
    assert created.exchange == "artifact-created"
    assert created.body["artifact"]["name"] == NAME and created.body["runId"] == 0

    assert (await livelogs.append(q, task_id, 0, NAME, {"offset": 6, "data": "more\n"}))["url"] == answer[
        "url"
    ]
    assert await published.collect() == []  # only the first append creates the artifact
    assert await text(q, task_id) == "hello\nmore\n"


async def test_offsets_count_utf8_bytes_and_retries_change_nothing(q: Queue, clock: FakeClock) -> None:
    task_id = await running_task(q, clock)
    assert await append(q, task_id, 0, "héllo\n") == 7
    assert await append(q, task_id, 7, "ab") == 9
    assert await append(q, task_id, 0, "héllo\n") == 9  # a retry of a stored chunk
    assert await append(q, task_id, 7, "ab") == 9
    assert await append(q, task_id, 9, "") == 9
    for offset, data in ((10, "x"), (8, "xyz"), (7, "abc")):
        with pytest.raises(RequestConflict, match="length is 9 bytes"):
            await append(q, task_id, offset, data)
    assert await text(q, task_id) == "héllo\nab"
    assert await livelogs.read_chunks(q, task_id, 0, 7) == [(7, "ab")]


async def test_the_first_append_starts_at_zero(q: Queue, clock: FakeClock) -> None:
    task_id = await running_task(q, clock)
    with pytest.raises(RequestConflict, match="offset 0"):
        await append(q, task_id, 3, "abc")
    with pytest.raises(ResourceNotFound):
        await livelogs.check_exists(q, task_id, 0)
    with pytest.raises(ResourceNotFound):
        await artifacts.info(q, task_id, 0, NAME)  # the refused append left nothing behind


async def test_final_closes_the_log(q: Queue, clock: FakeClock) -> None:
    task_id = await running_task(q, clock)
    await append(q, task_id, 0, "abc")
    assert not await livelogs.finished(q, task_id, 0)
    assert await append(q, task_id, 3, "end\n", final=True) == 7
    assert await livelogs.finished(q, task_id, 0)
    assert await append(q, task_id, 3, "end\n", final=True) == 7  # the closing call, retried
    assert await append(q, task_id, 7, "", final=True) == 7
    with pytest.raises(RequestConflict, match="closed"):
        await append(q, task_id, 7, "more")
    assert await text(q, task_id) == "abcend\n"


async def test_size_limit(q: Queue, clock: FakeClock) -> None:
    q.config = dataclasses.replace(q.config, max_live_log_bytes=10)
    task_id = await running_task(q, clock)
    assert await append(q, task_id, 0, "12345678") == 8
    with pytest.raises(InputTooLarge, match="at most 10"):
        await append(q, task_id, 8, "abc")
    assert await append(q, task_id, 8, "ab") == 10


async def test_one_name_per_run(q: Queue, clock: FakeClock) -> None:
    task_id = await running_task(q, clock)
    await append(q, task_id, 0, "a")
    with pytest.raises(RequestConflict, match=NAME):
        await append(q, task_id, 1, "b", name="public/logs/other.log")


async def test_only_running_runs_take_appends(q: Queue, clock: FakeClock) -> None:
    pending = new_id()
    await tasks.create_task(
        q, pending, definition(clock.now, taskQueueId="test-prov/nobody-claims"), guard=ALLOW_ALL
    )
    with pytest.raises(RequestConflict, match="pending"):
        await append(q, pending, 0, "a")
    with pytest.raises(ResourceNotFound):
        await append(q, new_id(), 0, "a")
    task_id = await running_task(q, clock)
    await append(q, task_id, 0, "a")
    with pytest.raises(ResourceNotFound):
        await livelogs.append(q, task_id, 1, NAME, {"offset": 0, "data": "a"})
    await claims.report(q, task_id, 0, "completed", "completed")
    with pytest.raises(RequestConflict, match="is completed: its live log is closed"):
        await append(q, task_id, 1, "b")
    assert await livelogs.finished(q, task_id, 0)


async def test_chunks_hold_at_most_a_mebibyte_and_no_nul(q: Queue, clock: FakeClock) -> None:
    task_id = await running_task(q, clock)
    with pytest.raises(InputValidationError, match=r"body\.data must be at most 1048576 bytes"):
        await append(q, task_id, 0, "é" * (512 * 1024 + 1))  # fewer characters than bytes
    assert await append(q, task_id, 0, "a\x00b") == 3  # NUL becomes SUBSTITUTE, byte for byte
    assert await append(q, task_id, 3, "c") == 4
    assert await text(q, task_id) == "a\x1abc"


async def test_racing_appends_at_one_offset_store_one_chunk(
    q: Queue, clock: FakeClock, published: Published
) -> None:
    task_id = await running_task(q, clock)
    await published.collect()
    chunks = ["x" * size for size in range(1, 7)]
    results = await asyncio.gather(*(append(q, task_id, 0, c) for c in chunks), return_exceptions=True)
    stored = await text(q, task_id)
    assert stored in chunks
    assert await livelogs.read_chunks(q, task_id, 0, 0) == [(0, stored)]
    for chunk, result in zip(chunks, results, strict=True):
        if isinstance(result, BaseException):  # only a longer chunk than the winner's is refused
            assert isinstance(result, RequestConflict) and len(chunk) > len(stored), result
        else:  # the winner, or a chunk the stored one already covers (a retry, as far as anyone can tell)
            assert result == len(stored) and len(chunk) <= len(stored)
    assert [m.exchange for m in await published.collect()] == ["artifact-created"]


async def test_followers_get_new_chunks_and_stop_when_closed(
    q: Queue, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(livelogs, "RECHECK_SECONDS", 60.0)  # only the notification can wake it in time
    task_id = await running_task(q, clock)
    await append(q, task_id, 0, "one\n")
    follower = asyncio.create_task(collect(q, task_id))
    await until(lambda: q.live_log_followers.watching(f"{task_id}/0") == 1)
    await asyncio.sleep(0.05)
    await append(q, task_id, 4, "two\n")
    await append(q, task_id, 8, "", final=True)
    assert await asyncio.wait_for(follower, 5) == "one\ntwo\n"
    assert q.live_log_followers.watching(f"{task_id}/0") == 0


async def test_followers_stop_when_the_run_is_resolved_or_the_client_leaves(
    q: Queue, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(livelogs, "RECHECK_SECONDS", 0.05)
    task_id = await running_task(q, clock)
    await append(q, task_id, 0, "started\n")
    gone = asyncio.Event()
    leaving = asyncio.create_task(collect(q, task_id, gone=gone))
    follower = asyncio.create_task(collect(q, task_id))
    await until(lambda: q.live_log_followers.watching(f"{task_id}/0") == 2)
    gone.set()
    assert await asyncio.wait_for(leaving, 5) == "started\n"
    await claims.report(q, task_id, 0, "failed", "failed")
    assert await asyncio.wait_for(follower, 5) == "started\n"


async def test_followers_end_when_the_server_stops(
    q: Queue, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(livelogs, "RECHECK_SECONDS", 60.0)
    task_id = await running_task(q, clock)
    await append(q, task_id, 0, "started\n")
    follower = asyncio.create_task(collect(q, task_id))
    await until(lambda: q.live_log_followers.watching(f"{task_id}/0") == 1)
    await asyncio.sleep(0.05)
    q.live_log_followers.close()  # what serve's shutdown does before uvicorn waits for responses
    assert await asyncio.wait_for(follower, 5) == "started\n"


async def test_followers_in_another_process_wake(
    q: Queue, db_url: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not db_url.startswith("postgresql"):
        pytest.skip("only PostgreSQL shares notifications between processes")
    monkeypatch.setattr(livelogs, "RECHECK_SECONDS", 60.0)
    other = Queue(await open_storage(db_url), QueueConfig(), clock=clock, credentials_issuer=QUEUE_ISSUER)
    try:
        await other.start()
        task_id = await running_task(q, clock)
        await append(q, task_id, 0, "here\n")
        follower = asyncio.create_task(collect(other, task_id))
        await until(lambda: other.live_log_followers.watching(f"{task_id}/0") == 1)
        await asyncio.sleep(0.05)
        await append(q, task_id, 5, "there\n", final=True)
        assert await asyncio.wait_for(follower, 5) == "here\nthere\n"
    finally:
        await other.storage.close()


async def test_sweep_deletes_expired_logs_in_batches(
    q: Queue, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(livelogs, "CHUNK_DELETE_BATCH", 2)
    swept = await running_task(q, clock)
    for i in range(5):
        await append(q, swept, i, "x")
    clock.advance(30 * 60)
    kept = await running_task(q, clock)  # a later deadline: its log expires later
    await append(q, kept, 0, "y")
    clock.advance(45 * 60 + 1)  # past the first deadline + 15 minutes
    assert await livelogs.sweep_expired(q) == 1
    assert await livelogs.read_chunks(q, swept, 0, 0) == []
    with pytest.raises(ResourceNotFound):
        await livelogs.check_exists(q, swept, 0)
    await livelogs.check_exists(q, kept, 0)
    clock.advance(30 * 60)
    assert await resolvers.sweep_expired(q) >= 1
    with pytest.raises(ResourceNotFound):
        await livelogs.check_exists(q, kept, 0)


async def collect(q: Queue, task_id: str, gone: asyncio.Event | None = None) -> str:
    chunks = livelogs.follow(q, task_id, 0, keep_following=True, gone=gone or asyncio.Event())
    return b"".join([c async for c in chunks]).decode()

"""Replays (storage/port.py): a Hawk-signed request's MAC is recorded by the first transaction of
the request's own task, with the request's writes; a second request with the same MAC commits
nothing and fails with `ReplayedRequest` (401), never a `UniqueViolation` (409) that a caller
might take for its own. The expiry sweep deletes the MACs whose timestamps left Hawk's window."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from types import SimpleNamespace
from typing import Any, TypeVar

import pytest

from taskyard.model import dates
from taskyard.queue import resolvers
from taskyard.storage.counting import counting
from taskyard.storage.port import (
    ReplayedRequest,
    Storage,
    Tx,
    UniqueViolation,
    remember_signed_request,
    run_in_transaction,
)

T = TypeVar("T")
LATER = dates.now_ms() + 15 * 60 * 1000
Opener = Callable[[Storage], AbstractAsyncContextManager[Tx]]
OPENERS: dict[str, Opener] = {
    "transaction": lambda s: s.transaction(),
    "optimistic": lambda s: s.optimistic(),
}


async def as_request(mac: str, body: Callable[[], Awaitable[T]], expires: int = LATER) -> T:
    """`body()` as a request signed with `mac` runs it: in a task of its own, as the server's. A
    replay carries the timestamp its MAC signs, so the same `expires` too."""

    async def serve() -> T:
        remember_signed_request(mac, expires)
        return await body()

    return await asyncio.create_task(serve())


async def groups(storage: Storage, *ids: str) -> list[str]:
    async with storage.reader() as session:
        return [r["task_group_id"] for i in ids if (r := await session.fetchrow("get_group", i))]


async def insert_group(storage: Storage, opener: Opener, group: str) -> None:
    async with opener(storage) as tx:
        await tx.fetchrow("get_group", group)  # a read first: before BEGIN in optimistic()
        await tx.defer("insert_group", group, "-", LATER)


@pytest.fixture(params=list(OPENERS))
def opener(request: pytest.FixtureRequest) -> Opener:
    return OPENERS[request.param]


async def test_a_replay_commits_nothing_and_is_refused(storage: Storage, opener: Opener) -> None:
    await as_request("mac-1", lambda: insert_group(storage, opener, "first"))
    with pytest.raises(ReplayedRequest) as refused:
        await as_request("mac-1", lambda: insert_group(storage, opener, "replayed"))
    assert not isinstance(refused.value, UniqueViolation)  # createTask would take it for its own
    assert refused.value.status == 401 and "Replayed request" in refused.value.message
    assert await groups(storage, "first", "replayed") == ["first"]
    await as_request("mac-2", lambda: insert_group(storage, opener, "another"))  # another MAC: done
    assert await groups(storage, "another") == ["another"]


async def test_a_request_records_its_mac_once(storage: Storage) -> None:
    async def two_transactions() -> None:
        await insert_group(storage, OPENERS["transaction"], "one")
        await insert_group(storage, OPENERS["optimistic"], "two")

    await as_request("mac-1", two_transactions)  # the second found it recorded: no violation
    assert await groups(storage, "one", "two") == ["one", "two"]
    with pytest.raises(ReplayedRequest):
        await as_request("mac-1", lambda: insert_group(storage, OPENERS["transaction"], "three"))


async def test_a_transaction_that_commits_nothing_leaves_it_to_the_next(storage: Storage) -> None:
    attempts = 0

    async def body(tx: Tx) -> None:
        nonlocal attempts
        attempts += 1
        await tx.execute("insert_group", f"attempt-{attempts}", "-", LATER)
        if attempts == 1:
            raise RuntimeError("rolled back")

    async def retried() -> None:
        with pytest.raises(RuntimeError):
            await run_in_transaction(storage, body)
        await run_in_transaction(storage, body)  # records it: the first committed nothing

    await as_request("mac-1", retried)
    assert await groups(storage, "attempt-1", "attempt-2") == ["attempt-2"]
    with pytest.raises(ReplayedRequest):
        await as_request("mac-1", lambda: insert_group(storage, OPENERS["transaction"], "replayed"))


async def test_a_task_the_request_started_records_nothing(storage: Storage) -> None:
    async def with_background_work() -> None:
        # A task started by the request inherits its context, but its writes are not the request's.
        await asyncio.create_task(insert_group(storage, OPENERS["transaction"], "background"))

    await as_request("mac-1", with_background_work)
    await as_request("mac-1", lambda: insert_group(storage, OPENERS["transaction"], "itself"))
    assert await groups(storage, "background", "itself") == ["background", "itself"]


async def test_reads_record_nothing(storage: Storage) -> None:
    async def read() -> None:
        async with storage.reader() as session:
            await session.fetchrow("get_group", "none")

    await as_request("mac-1", read)
    await as_request("mac-1", lambda: insert_group(storage, OPENERS["transaction"], "written"))
    assert await groups(storage, "written") == ["written"]


async def test_a_statement_run_alone_is_recorded_too(storage: Storage) -> None:
    async def alone(group: str) -> int:
        return await storage.execute("insert_group", group, "-", LATER)

    assert await as_request("mac-1", lambda: alone("first")) == 1
    with pytest.raises(ReplayedRequest):
        await as_request("mac-1", lambda: alone("replayed"))
    assert await groups(storage, "first", "replayed") == ["first"]


async def test_two_processes_racing_with_one_mac_do_it_once(storage: Storage, db_url: str) -> None:
    """Another storage on the same database stands for another process of the deployment."""
    from taskyard.storage import open_storage

    other = await open_storage(db_url)
    try:
        outcomes = await asyncio.gather(
            as_request("mac-1", lambda: insert_group(storage, OPENERS["optimistic"], "here")),
            as_request("mac-1", lambda: insert_group(other, OPENERS["optimistic"], "there")),
            return_exceptions=True,
        )
    finally:
        await other.close()
    assert sorted(type(o).__name__ for o in outcomes) == ["NoneType", "ReplayedRequest"]
    assert len(await groups(storage, "here", "there")) == 1


async def test_on_postgresql_the_record_rides_in_a_message_sent_anyway(storage: Storage, db_url: str) -> None:
    if not db_url.startswith("postgres"):
        pytest.skip("SQLite has no round trip to save: the record is one insert after BEGIN")

    async def counted(opener: Opener, group: str) -> tuple[int, int]:
        with counting() as tally:
            await insert_group(storage, opener, group)
        return tally.statements, tally.round_trips

    for name, opener in OPENERS.items():
        plain = await counted(opener, f"{name}-plain")
        signed = await as_request(f"mac-{name}", lambda o=opener, n=name: counted(o, f"{n}-signed"))
        assert signed == (plain[0] + 1, plain[1]), name
    # A transaction that sends nothing (its reads ran before BEGIN, it wrote nothing) records nothing.
    assert await as_request("mac-unsent", lambda: counted_reads(storage)) == (1, 1)
    await as_request("mac-unsent", lambda: insert_group(storage, OPENERS["transaction"], "later"))


async def counted_reads(storage: Storage) -> tuple[int, int]:
    with counting() as tally:
        async with storage.optimistic() as tx:
            await tx.fetchrow("get_group", "none")
    return tally.statements, tally.round_trips


async def test_the_sweep_deletes_what_left_the_window_in_bounded_batches(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resolvers, "SEEN_REQUESTS_BATCH", 2)
    now = dates.now_ms()
    expired = now - resolvers.CLOCK_GRACE_MS - 1
    rows = [(f"old-{n}", expired - n) for n in range(5)] + [("within-grace", now - 1), ("live", now + 60_000)]
    async with storage.transaction() as tx:
        for mac, expires in rows:
            await tx.execute("record_signed_request", mac, expires)
    q: Any = SimpleNamespace(storage=storage)
    assert [await resolvers.sweep_seen_requests(q) for _ in range(4)] == [2, 2, 1, 0]
    for mac, expires in rows[:1] + rows[-2:]:
        again = as_request(mac, lambda mac=mac: insert_group(storage, OPENERS["transaction"], mac), expires)
        if mac.startswith("old"):
            await again  # swept: only Hawk's timestamp check refuses it now
        else:
            with pytest.raises(ReplayedRequest):
                await again

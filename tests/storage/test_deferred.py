"""Deferred writes (`Tx.defer`): on PostgreSQL they ride with the next statement or COMMIT, with
their arguments written in as literals; on SQLite they run at once. Either way every statement
sees them, the text stored is the text given, and an error among them commits nothing."""

from __future__ import annotations

import json

import pytest

from taskyard.events import outbox
from taskyard.storage.counting import counting
from taskyard.storage.port import RowMoved, Storage, UniqueViolation
from taskyard.storage.postgres import PostgresStorage
from tests.storage.helpers import _pending

AWKWARD = "it's a \\ back'slash ''quote\" $1 :name -- not a comment; 🦀 ñ\n\t\r end"


async def groups(storage: Storage, *ids: str) -> list[str]:
    async with storage.reader() as session:
        return [r["task_group_id"] for i in ids if (r := await session.fetchrow("get_group", i))]


async def test_the_next_statement_sees_a_deferred_write_and_it_commits(storage: Storage) -> None:
    async with storage.transaction() as tx:
        await tx.defer("insert_group", "deferred", "-", 7)
        row = await tx.fetchrow("get_group", "deferred")
        assert row is not None and row["expires"] == 7
        await tx.defer("insert_group", "at-commit", "-", 8)
    assert await groups(storage, "deferred", "at-commit") == ["deferred", "at-commit"]


async def test_text_is_stored_as_given(storage: Storage) -> None:
    rows = [
        ("exchange/" + AWKWARD, "route.*.#", '["a\'b"]', '{"k": "\\"v\\" \\\\ \'x\'"}', 10**15),
        ("plain", "", "[]", "{}", 0),
    ]
    async with storage.transaction() as tx:
        await tx.defer_many("insert_event", rows)
        await tx.defer("insert_group", AWKWARD, "-", -5)
    async with storage.transaction() as tx:
        await tx.defer("lock_relay", outbox._RELAY_LOCK)
        taken = await tx.fetch("take_events", 10)
    got = sorted((r["exchange"], r["routing_key"], r["cc"], r["body"]) for r in taken)
    assert got == sorted(row[:4] for row in rows)
    assert await groups(storage, AWKWARD) == [AWKWARD]


async def test_an_error_in_a_deferred_write_commits_nothing(storage: Storage) -> None:
    async with storage.transaction() as tx:
        await tx.execute("insert_group", "taken", "-", 1)
    with pytest.raises(UniqueViolation):
        async with storage.transaction() as tx:
            await tx.execute("insert_group", "first", "-", 1)
            await tx.defer("insert_group", "taken", "-", 1)  # SQLite raises here, PostgreSQL at COMMIT
            await tx.defer("insert_group", "after", "-", 1)
    assert await groups(storage, "first", "taken", "after") == ["taken"]
    async with storage.transaction() as tx:  # the connection is fine afterwards
        await tx.defer("insert_group", "later", "-", 1)
    assert await groups(storage, "later") == ["later"]


async def test_a_transaction_of_deferred_writes_alone_is_all_or_nothing(storage: Storage) -> None:
    """On PostgreSQL such a transaction is one message without BEGIN, which the server runs as a
    transaction by itself: a failing write in it undoes the writes before it too."""
    async with storage.transaction() as tx:
        await tx.defer("insert_group", "held", "-", 1)
    with pytest.raises(UniqueViolation):
        async with storage.transaction() as tx:
            await tx.defer("insert_group", "before", "-", 1)
            await tx.defer("insert_group", "held", "-", 1)
    assert await groups(storage, "before", "held") == ["held"]
    async with storage.transaction() as tx:  # and the connection is idle, not in a failed transaction
        await tx.defer("insert_group", "next", "-", 1)
    assert await groups(storage, "next") == ["next"]


@pytest.mark.postgres
async def test_on_postgresql_deferred_writes_cost_no_round_trip_of_their_own(
    storage: Storage, db_url: str
) -> None:
    if not db_url.startswith("postgres"):
        pytest.skip("SQLite has no round trip to save")
    with counting() as tally:
        async with storage.transaction() as tx:
            await tx.defer("insert_group", "a", "-", 1)
            await tx.defer_many("insert_event", [("e", "r", "[]", "{}", 1)] * 2)
            tx.notify("somewhere", "x")
    assert tally.trips == ["insert_group+insert_event+NOTIFY x4"]  # a transaction by itself
    with counting() as tally:
        async with storage.transaction() as tx:
            await tx.defer("insert_group", "b", "-", 1)
            await tx.fetchrow("get_group", "b")
    assert tally.trips == ["BEGIN+insert_group x2", "get_group", "COMMIT"]
    with counting() as tally:
        async with storage.transaction() as tx:
            pass
    assert tally.trips == []


@pytest.mark.postgres
async def test_on_postgresql_an_optimistic_transaction_reads_before_it_begins(
    storage: Storage, db_url: str
) -> None:
    if not db_url.startswith("postgres"):
        pytest.skip("SQLite's optimistic() is transaction()")
    with counting() as tally:
        async with storage.optimistic() as tx:
            await tx.fetchrow("get_group", "c")
            await tx.defer("insert_group", "c", "-", 1)
            await tx.defer("insert_group", "d", "-", 1)
    assert tally.trips == ["get_group", "insert_group x2"]
    with counting() as tally:
        async with storage.optimistic() as tx:
            await tx.defer("insert_group", "e", "-", 1)
            await tx.fetchrow("get_group", "e")  # sees its write: the transaction has begun
            await tx.execute("insert_group", "f", "-", 1)
    assert tally.trips == ["BEGIN+insert_group x2", "get_group", "insert_group", "COMMIT"]
    assert await groups(storage, "c", "d", "e", "f") == ["c", "d", "e", "f"]


async def test_a_list_of_ids_goes_in_as_json_text(storage: Storage) -> None:
    async with storage.transaction() as tx:
        for name in ("a", "b", "c"):
            await tx.execute("insert_resolution", name, "g", "completed")
    async with storage.transaction() as tx:
        ids = {r["task_id"]: r["id"] for r in await tx.fetch("take_resolutions", 10)}
        await tx.defer("delete_resolutions", json.dumps([ids["a"], ids["c"]]))
        await tx.defer("delete_resolutions", "[]")
    async with storage.transaction() as tx:
        assert [r["task_id"] for r in await tx.fetch("take_resolutions", 10)] == ["b"]


@pytest.mark.postgres
async def test_on_postgresql_a_deferred_write_takes_plain_values_only(storage: Storage, db_url: str) -> None:
    if not db_url.startswith("postgres"):
        pytest.skip("SQLite takes lists as JSON")
    for bad in (["-"], {"a": 1}, 1.5, b"bytes"):
        with pytest.raises(TypeError, match="a deferred write takes"):
            async with storage.transaction() as tx:
                await tx.defer("insert_group", "g", bad, 1)


async def test_a_checked_write_that_finds_its_row_moved_fails_the_transaction(storage: Storage) -> None:
    """`update_task_checked` checks the version read; on PostgreSQL it is deferred, and nobody reads
    its row count, so the query itself fails the transaction: RowMoved, and nothing commits."""
    await _pending(storage, "moved", 1, 1)  # version 1
    update = {"task_id": "moved", "runs": "[]", "state": "pending", "retries_left": 5,
              "taken_until": None, "claimed_at": None, "ever_resolved": False,
              "priority": "lowest", "version": 3, "created": 0}  # fmt: skip
    for opened in (storage.transaction, storage.optimistic):
        with pytest.raises(RowMoved):
            async with opened() as tx:
                await tx.defer("insert_group", "not-kept", "-", 1)
                await tx.defer_checked("update_task_checked", **update, old_version=2)
        assert await groups(storage, "not-kept") == []
    async with storage.optimistic() as tx:
        await tx.defer_checked("update_task_checked", **update, old_version=1)
    async with storage.reader() as session:
        row = await session.fetchrow("get_task", "moved")
    assert row is not None and row["version"] == 3


async def _prepared(storage: PostgresStorage) -> dict[str, object]:
    """The deferred queries the (one) pooled connection has PREPAREd, and when it prepared each."""
    async with storage._open_pool().connection() as conn:
        rows = await conn.fetch("SELECT name, prepare_time FROM pg_prepared_statements WHERE name LIKE 'ty%'")
    return {row["name"]: row["prepare_time"] for row in rows}


@pytest.mark.postgres
async def test_on_postgresql_a_connection_prepares_a_deferred_query_once(
    one_connection: PostgresStorage,
) -> None:
    """The server parses and plans a deferred write's query once per connection: the first message
    that sends it PREPAREs it, later ones only EXECUTE it."""
    storage = one_connection
    async with storage.transaction() as tx:
        await tx.defer("insert_group", "one", "-", 1)
    first = await _prepared(storage)
    assert set(first) == {"ty_insert_group"}
    async with storage.optimistic() as tx:
        await tx.defer("insert_group", "two", "-", 1)
        await tx.defer_many("insert_event", [("e", "r", "[]", "{}", 1)])
    again = await _prepared(storage)
    assert again["ty_insert_group"] == first["ty_insert_group"]
    assert set(again) == {"ty_insert_group", "ty_insert_event"}
    assert await groups(storage, "one", "two") == ["one", "two"]


@pytest.mark.postgres
async def test_on_postgresql_a_failed_message_leaves_the_connection_able_to_defer(
    one_connection: PostgresStorage,
) -> None:
    """A message that fails may or may not have run its PREPAREs (they go first; a transaction
    that had already failed runs none), and one never sent ran none. Either way the connection's
    next deferred writes work."""
    storage = one_connection
    async with storage.transaction() as tx:
        await tx.execute("insert_group", "taken", "-", 1)
    # Never sent: the transaction's body raised before its message went.
    with pytest.raises(ZeroDivisionError):
        async with storage.transaction() as tx:
            await tx.defer("insert_resolution", "t", "g", "completed")
            1 / 0  # noqa: B018
    async with storage.transaction() as tx:
        await tx.defer("insert_resolution", "t", "g", "completed")
    # Prepared, then failed: the write after the PREPARE broke the message.
    with pytest.raises(UniqueViolation):
        async with storage.transaction() as tx:
            await tx.defer("insert_group", "taken", "-", 1)
    async with storage.transaction() as tx:
        await tx.defer("insert_group", "after-a-failed-write", "-", 1)
    # Not prepared: the transaction had failed already, so the message ran nothing.
    with pytest.raises(Exception, match="aborted"):
        async with storage.transaction() as tx:
            with pytest.raises(UniqueViolation):
                await tx.execute("insert_group", "taken", "-", 1)
            await tx.defer_many("insert_event", [("e", "r", "[]", "{}", 1)])
    async with storage.transaction() as tx:
        await tx.defer_many("insert_event", [("e", "r", "[]", "{}", 2)])
        await tx.defer("insert_group", "after-a-failed-transaction", "-", 1)
    assert set(await _prepared(storage)) == {"ty_insert_resolution", "ty_insert_group", "ty_insert_event"}
    assert await groups(storage, "after-a-failed-write", "after-a-failed-transaction") == [
        "after-a-failed-write",
        "after-a-failed-transaction",
    ]


@pytest.mark.postgres
async def test_on_postgresql_a_notification_channel_is_an_identifier(storage: Storage, db_url: str) -> None:
    """Notifications go as NOTIFY, which takes the channel as a bare identifier: anything else is
    refused before it is sent, and nothing of the transaction commits."""
    if not db_url.startswith("postgres"):
        pytest.skip("SQLite's notifications stay in the process")
    with pytest.raises(ValueError, match="lowercase identifier"):
        async with storage.transaction() as tx:
            await tx.defer("insert_group", "refused", "-", 1)
            tx.notify("task_pending; DROP TABLE tasks", "x")
    assert await groups(storage, "refused") == []

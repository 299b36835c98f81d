"""The secrets service on SQLite and PostgreSQL: values sealed at rest, expiry, the sweep, and the
re-sealing that follows a change of the deployment's secret key."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import asyncpg
import pytest

from taskyard.model import dates
from taskyard.model.errors import InvalidRequestArguments, ResourceNotFound, Unavailable
from taskyard.secrets import crypto, store
from taskyard.secrets.service import Secrets
from taskyard.storage.port import Storage
from tests.conftest import SECRET_KEY, FakeClock

MARKER = "plaintext-marker-7f3a9c"  # in every value: what must never be in the database
VALUE = {"password": MARKER, "nested": {"list": [1, 2, MARKER]}}


async def raw_rows(db_url: str) -> list[tuple[object, ...]]:
    """Every row of the secrets table, read with the driver, past the storage layer."""
    if db_url.startswith("sqlite:"):
        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        try:
            return list(conn.execute("SELECT * FROM secrets ORDER BY name"))
        finally:
            conn.close()
    pg = await asyncpg.connect(db_url)
    try:
        return [tuple(row) for row in await pg.fetch("SELECT * FROM secrets ORDER BY name")]
    finally:
        await pg.close()


async def raw_execute(db_url: str, sql: str, *args: object) -> None:
    if db_url.startswith("sqlite:"):
        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
        try:
            conn.execute(sql.replace("$1", "?").replace("$2", "?"), args)
        finally:
            conn.close()
        return
    pg = await asyncpg.connect(db_url)
    try:
        await pg.execute(sql, *args)
    finally:
        await pg.close()


def later(clock: FakeClock, seconds: float = 3600) -> int:
    return clock() + int(seconds * 1000)


async def test_a_value_is_stored_sealed_and_read_back(
    secrets: Secrets, clock: FakeClock, db_url: str
) -> None:
    await store.set_secret(secrets, "project/app/db", VALUE, later(clock), client_id="tester")
    got = await store.get_secret(secrets, "project/app/db")
    assert got == {"secret": VALUE, "expires": dates.to_iso(later(clock))}
    rows = await raw_rows(db_url)
    assert len(rows) == 1
    assert not any(MARKER in str(column) for column in rows[0])
    assert "password" not in str(rows[0])
    if db_url.startswith("sqlite:"):  # nor anywhere in the database's files
        files = Path(db_url.removeprefix("sqlite:///")).parent.glob("*.sqlite3*")
        assert not any(MARKER.encode() in f.read_bytes() for f in files)


async def test_each_set_seals_afresh(secrets: Secrets, clock: FakeClock, db_url: str) -> None:
    await store.set_secret(secrets, "a", VALUE, later(clock), client_id="tester")
    first = await raw_rows(db_url)
    await store.set_secret(secrets, "a", VALUE, later(clock), client_id="tester")
    second = await raw_rows(db_url)
    assert first[0][2] != second[0][2]  # a new nonce: equal values are not seen to be equal


async def test_a_sealed_value_moved_to_another_name_does_not_open(
    secrets: Secrets, clock: FakeClock, db_url: str
) -> None:
    await store.set_secret(secrets, "victim", VALUE, later(clock), client_id="tester")
    await store.set_secret(secrets, "mine", {"x": 1}, later(clock), client_id="tester")
    sealed = next(row[2] for row in await raw_rows(db_url) if row[0] == "victim")
    await raw_execute(db_url, "UPDATE secrets SET sealed = $1 WHERE name = $2", sealed, "mine")
    with pytest.raises(Unavailable) as refused:
        await store.get_secret(secrets, "mine")
    assert "altered" in refused.value.message
    assert MARKER not in refused.value.message


async def test_set_replaces_value_and_expiry(secrets: Secrets, clock: FakeClock) -> None:
    await store.set_secret(secrets, "k", {"v": 1}, later(clock), client_id="tester")
    await store.set_secret(secrets, "k", {"v": 2}, later(clock, 7200), client_id="tester")
    assert await store.get_secret(secrets, "k") == {
        "secret": {"v": 2},
        "expires": dates.to_iso(later(clock, 7200)),
    }


async def test_an_expired_secret_is_not_found_nor_listed(secrets: Secrets, clock: FakeClock) -> None:
    await store.set_secret(secrets, "short", {"v": 1}, later(clock, 60), client_id="tester")
    await store.set_secret(secrets, "long", {"v": 1}, later(clock), client_id="tester")
    clock.advance(61)
    with pytest.raises(ResourceNotFound):
        await store.get_secret(secrets, "short")
    assert [e["name"] for e in await store.list_secrets(secrets, after="", limit=10)] == ["long"]


async def test_a_secret_set_already_expired_is_never_readable(secrets: Secrets, clock: FakeClock) -> None:
    await store.set_secret(secrets, "past", {"v": 1}, clock() - 1000, client_id="tester")
    with pytest.raises(ResourceNotFound):
        await store.get_secret(secrets, "past")


async def test_remove_deletes_and_succeeds_for_a_missing_name(secrets: Secrets, clock: FakeClock) -> None:
    await store.set_secret(secrets, "gone", {"v": 1}, later(clock), client_id="tester")
    await store.remove_secret(secrets, "gone", client_id="tester")
    await store.remove_secret(secrets, "gone", client_id="tester")
    with pytest.raises(ResourceNotFound):
        await store.get_secret(secrets, "gone")


async def test_a_name_longer_than_the_limit_is_refused(secrets: Secrets, clock: FakeClock) -> None:
    with pytest.raises(InvalidRequestArguments, match="at most 256 characters"):
        await store.set_secret(secrets, "x" * 257, {}, later(clock), client_id="tester")


async def test_the_sweep_deletes_expired_secrets_in_bounded_batches(
    storage: Storage, clock: FakeClock, db_url: str
) -> None:
    secrets = Secrets(storage, secret_key=SECRET_KEY, clock=clock, sweep_batch=2)
    for i in range(5):
        await store.set_secret(secrets, f"old-{i}", {"i": i}, later(clock, 10), client_id="tester")
    await store.set_secret(secrets, "kept", {"v": 1}, later(clock), client_id="tester")
    clock.advance(11)
    assert [await store.sweep_expired(secrets) for _ in range(4)] == [2, 2, 1, 0]
    assert [row[0] for row in await raw_rows(db_url)] == ["kept"]


async def test_a_new_secret_key_with_the_old_one_reads_and_reseals(
    storage: Storage, clock: FakeClock, db_url: str
) -> None:
    before = Secrets(storage, secret_key="the-old-key", clock=clock)
    for i in range(3):
        await store.set_secret(before, f"s{i}", {"i": i, "m": MARKER}, later(clock), client_id="tester")
    only_new = Secrets(storage, secret_key="the-new-key", clock=clock)
    with pytest.raises(Unavailable, match="TASKYARD_OLD_SECRET_KEY"):
        await store.get_secret(only_new, "s0")
    assert await store.reseal(only_new) == 0  # no old key given: nothing it could reseal

    rotating = Secrets(
        storage, secret_key="the-new-key", old_secret_key="the-old-key", clock=clock, reseal_batch=2
    )
    assert (await store.get_secret(rotating, "s1"))["secret"] == {"i": 1, "m": MARKER}
    await store.set_secret(rotating, "s2", {"i": 22}, later(clock), client_id="tester")  # sealed anew
    assert [await store.reseal(rotating) for _ in range(3)] == [2, 0, 0]
    assert rotating.resealed_all

    new_key_id = crypto.key_id(crypto.derive_key("the-new-key"))
    assert {row[1] for row in await raw_rows(db_url)} == {new_key_id}
    got = [(await store.get_secret(only_new, f"s{i}"))["secret"] for i in range(3)]
    assert got == [{"i": 0, "m": MARKER}, {"i": 1, "m": MARKER}, {"i": 22}]
    with pytest.raises(Unavailable):  # the old key alone no longer opens them
        await store.get_secret(Secrets(storage, secret_key="the-old-key", clock=clock), "s0")


async def test_the_key_is_derived_for_its_purpose_and_named_without_revealing_it() -> None:
    key = crypto.derive_key(SECRET_KEY)
    assert len(key) == 32 and key != crypto.derive_key(SECRET_KEY + "x")
    assert SECRET_KEY.encode() not in key
    assert len(crypto.key_id(key)) == 16 and crypto.key_id(key) not in key.hex()


async def test_list_pages_by_name(secrets: Secrets, clock: FakeClock) -> None:
    for name in ["b", "a/x", "c:1", "a"]:
        await store.set_secret(secrets, name, {}, later(clock), client_id="tester")
    first = await store.list_secrets(secrets, after="", limit=2)
    assert [e["name"] for e in first] == ["a", "a/x", "b"]
    rest = await store.list_secrets(secrets, after="a/x", limit=2)
    assert [e["name"] for e in rest] == ["b", "c:1"]

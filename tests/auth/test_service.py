"""The auth service on real storage (both backends): clients, roles, lookups, caches, stored secrets."""

from __future__ import annotations

import sqlite3

import mohawk
import pytest

from taskyard.auth import clients, hawk, roles, static
from taskyard.auth.clients import ClientSpec
from taskyard.auth.service import Auth, client_token
from taskyard.model import dates
from taskyard.model.errors import (
    AuthenticationFailed,
    ConfigError,
    InputError,
    RequestConflict,
    ResourceNotFound,
)
from taskyard.model.guard import ALLOW_ALL
from taskyard.storage.port import Storage
from tests.auth.helpers import EXPIRES, poll_until
from tests.conftest import ROOT_TOKEN, SECRET_KEY, FakeClock


def spec(*scopes: str, description: str = "a test client", expires: int = EXPIRES) -> ClientSpec:
    return ClientSpec(description=description, expires=expires, scopes=scopes)


async def authenticated(
    auth: Auth, client_id: str, token: str, *, now_ms: int | None = None
) -> hawk.Authenticated:
    """Authenticate a GET signed with `token` as `client_id`, at `now_ms` (the wall clock if None)."""
    url = "http://testserver/api/auth/v1/scopes/current"
    sender = mohawk.Sender(
        credentials={"id": client_id, "key": token, "algorithm": "sha256"},
        url=url,
        method="GET",
        content="",
        content_type="",
        always_hash_content=False,
        _timestamp=None if now_ms is None else now_ms // 1000,
    )
    request = hawk.Request(
        "GET", "/api/auth/v1/scopes/current", "testserver", 80, sender.request_header, b"", ""
    )
    role_set = await auth.role_set()
    who = await hawk.authenticate(
        request, auth.lookup, now_ms=dates.now_ms() if now_ms is None else now_ms, expand=role_set.expand
    )
    assert who is not None
    return who


# ---------------------------------------------------------------------------------------------------
# Clients


async def test_create_get_list_update_delete_a_client(auth: Auth, clock: FakeClock) -> None:
    created, token = await clients.create_client(auth, "project/a", spec("queue:get-task:*"), guard=ALLOW_ALL)
    assert created.client_id == "project/a"
    assert created.scopes == ("queue:get-task:*",)
    assert created.created == created.last_modified == created.last_rotated == clock()
    assert not created.disabled and not created.delete_on_expiration
    assert len(token) == 44 and token.replace("-", "").replace("_", "").isalnum()
    assert await clients.get_client(auth, "project/a") == created

    await clients.create_client(auth, "project/b", spec(), guard=ALLOW_ALL)
    await clients.create_client(auth, "other/c", spec(), guard=ALLOW_ALL)
    listed = await clients.list_clients(auth, prefix="project/")
    assert [c.client_id for c in listed] == ["project/a", "project/b"]
    everyone = [c.client_id for c in await clients.list_clients(auth)]
    assert everyone == [
        "other/c",
        "project/a",
        "project/b",
        static.QUEUE_CLIENT_ID,
        static.ROOT_CLIENT_ID,
        static.WORKER_MANAGER_CLIENT_ID,
    ]
    page = await clients.list_clients(auth, after="other/c", limit=1)
    assert [c.client_id for c in page] == ["project/a", "project/b"]  # one more than asked: there are more

    clock.advance(5)
    updated = await clients.update_client(
        auth, "project/a", spec("queue:status:*", description="changed"), guard=ALLOW_ALL
    )
    assert updated.scopes == ("queue:status:*",) and updated.description == "changed"
    assert updated.last_modified == clock() and updated.created == created.created
    kept = await clients.update_client(auth, "project/a", ClientSpec("again", EXPIRES, None), guard=ALLOW_ALL)
    assert kept.scopes == ("queue:status:*",)

    await clients.delete_client(auth, "project/a")
    await clients.delete_client(auth, "project/a")  # deleting twice is fine
    with pytest.raises(ResourceNotFound):
        await clients.get_client(auth, "project/a")
    with pytest.raises(ResourceNotFound):
        await clients.update_client(auth, "project/a", spec(), guard=ALLOW_ALL)
    assert await auth.lookup("project/a") is None


async def test_create_client_again_is_idempotent_then_a_conflict(auth: Auth, clock: FakeClock) -> None:
    first, token = await clients.create_client(auth, "idem", spec("a", "b"), guard=ALLOW_ALL)
    again, same_token = await clients.create_client(auth, "idem", spec("a", "b"), guard=ALLOW_ALL)
    assert (again, same_token) == (first, token)
    for different in (spec("a"), spec("a", "b", description="other"), spec("a", "b", expires=EXPIRES + 1)):
        with pytest.raises(RequestConflict):
            await clients.create_client(auth, "idem", different, guard=ALLOW_ALL)
    clock.advance(16 * 60)  # TaskCluster answers 409 once the first creation is 15 minutes old
    with pytest.raises(RequestConflict):
        await clients.create_client(auth, "idem", spec("a", "b"), guard=ALLOW_ALL)


async def test_static_clients_cannot_be_changed(auth: Auth) -> None:
    root = await clients.get_client(auth, static.ROOT_CLIENT_ID)
    assert root.scopes == ("*",)
    for change in (
        clients.create_client(auth, "static/mine", spec(), guard=ALLOW_ALL),
        clients.update_client(auth, static.ROOT_CLIENT_ID, spec(), guard=ALLOW_ALL),
        clients.disable_client(auth, static.ROOT_CLIENT_ID),
        clients.reset_access_token(auth, static.ROOT_CLIENT_ID),
        clients.delete_client(auth, static.ROOT_CLIENT_ID),
    ):
        with pytest.raises(InputError, match="static/"):
            await change
    assert (await auth.lookup(static.ROOT_CLIENT_ID)) == static.static_clients(ROOT_TOKEN)[
        static.ROOT_CLIENT_ID
    ]


async def test_scopes_ending_in_two_stars_are_refused(auth: Auth) -> None:
    with pytest.raises(InputError, match=r"\*\*"):
        await clients.create_client(auth, "stars", spec("queue:**"), guard=ALLOW_ALL)
    await clients.create_client(auth, "stars", spec("queue:*"), guard=ALLOW_ALL)
    with pytest.raises(InputError, match=r"\*\*"):
        await clients.update_client(auth, "stars", spec("queue:**"), guard=ALLOW_ALL)
    with pytest.raises(InputError, match=r"\*\*"):
        await roles.create_role(auth, "stars", "d", ["a:**"], guard=ALLOW_ALL)
    with pytest.raises(InputError, match=r"\*\*"):
        await roles.create_role(auth, "stars**", "d", ["a"], guard=ALLOW_ALL)


async def test_authorize_sees_what_is_granted_before_anything_changes(auth: Auth) -> None:
    seen: list[dict[str, object]] = []

    def refuse(**values: object) -> None:
        seen.append(values)
        raise PermissionError("no")

    with pytest.raises(PermissionError):
        await clients.create_client(auth, "gated", spec("x", "y"), guard=refuse)
    with pytest.raises(ResourceNotFound):
        await clients.get_client(auth, "gated")
    await clients.create_client(auth, "gated", spec("x"), guard=ALLOW_ALL)
    with pytest.raises(PermissionError):
        await clients.update_client(auth, "gated", spec("x", "z"), guard=refuse)
    with pytest.raises(PermissionError):
        await roles.create_role(auth, "gated", "d", ["r"], guard=refuse)
    await roles.create_role(auth, "gated", "d", ["r*"], guard=ALLOW_ALL)
    with pytest.raises(PermissionError):
        await roles.update_role(auth, "gated", "d", ["r1", "s"], guard=refuse)
    # createClient: all its scopes; updateClient: those added; updateRole: those its expansion lacked
    assert seen == [{"scopes": ["x", "y"]}, {"scopesAdded": ["z"]}, {"scopes": ["r"]}, {"scopesAdded": ["s"]}]
    assert (await clients.get_client(auth, "gated")).scopes == ("x",)
    assert (await roles.get_role(auth, "gated")).scopes == ("r*",)


# ---------------------------------------------------------------------------------------------------
# Authentication: lookups, expiry, disabling, resets


async def test_a_created_client_authenticates_with_its_token(auth: Auth) -> None:
    await roles.create_role(auth, "team", "d", ["queue:status:*"], guard=ALLOW_ALL)
    _, token = await clients.create_client(auth, "worker/1", spec("assume:team"), guard=ALLOW_ALL)
    who = await authenticated(auth, "worker/1", token)
    assert who.client_id == "worker/1" and who.scopes == ("assume:team",)
    assert await auth.expand([*who.unexpanded_scopes, "assume:anonymous"]) == [
        "assume:anonymous",
        "assume:team",
        "queue:get-artifact:public/*",
        "queue:status:*",
    ]
    with pytest.raises(AuthenticationFailed, match="Bad mac"):
        await authenticated(auth, "worker/1", token[:-1] + ("A" if token[-1] != "A" else "B"))


async def test_expired_and_disabled_clients_are_refused(auth: Auth) -> None:
    soon = dates.now_ms() + dates.HOUR
    _, token = await clients.create_client(auth, "brief", spec(expires=soon), guard=ALLOW_ALL)
    await authenticated(auth, "brief", token)
    with pytest.raises(AuthenticationFailed, match="has expired"):
        await authenticated(auth, "brief", token, now_ms=soon + dates.MINUTE)

    _, token = await clients.create_client(auth, "switch", spec(), guard=ALLOW_ALL)
    disabled = await clients.disable_client(auth, "switch")
    assert disabled.disabled and (await clients.disable_client(auth, "switch")).disabled
    with pytest.raises(AuthenticationFailed, match="is disabled"):
        await authenticated(auth, "switch", token)
    assert not (await clients.enable_client(auth, "switch")).disabled
    await authenticated(auth, "switch", token)
    with pytest.raises(ResourceNotFound):
        await clients.enable_client(auth, "nobody")


async def test_reset_access_token_revokes_the_old_one(auth: Auth, clock: FakeClock) -> None:
    _, old = await clients.create_client(auth, "rotating", spec(), guard=ALLOW_ALL)
    await authenticated(auth, "rotating", old)  # now cached
    clock.advance(60)
    client, new = await clients.reset_access_token(auth, "rotating")
    assert new != old and len(new) == 44 and client.last_rotated == clock()
    with pytest.raises(AuthenticationFailed, match="Bad mac"):
        await authenticated(auth, "rotating", old)
    await authenticated(auth, "rotating", new)
    with pytest.raises(ResourceNotFound):
        await clients.reset_access_token(auth, "nobody")


async def test_last_date_used_is_kept_to_within_hours(auth: Auth, clock: FakeClock) -> None:
    created, token = await clients.create_client(auth, "used", spec(), guard=ALLOW_ALL)
    await authenticated(auth, "used", token)
    assert (await clients.get_client(auth, "used")).last_date_used == created.created
    clock.advance(7 * 3600)
    await authenticated(auth, "used", token)
    assert (await clients.get_client(auth, "used")).last_date_used == clock()


async def test_expired_clients_that_asked_for_it_are_deleted(auth: Auth, clock: FakeClock) -> None:
    end = clock() + dates.HOUR
    await clients.create_client(
        auth, "ephemeral", ClientSpec("d", end, (), delete_on_expiration=True), guard=ALLOW_ALL
    )
    await clients.create_client(auth, "lingering", ClientSpec("d", end, ()), guard=ALLOW_ALL)
    assert await clients.delete_expired_clients(auth) == 0
    clock.advance(2 * 3600)
    assert await clients.delete_expired_clients(auth) == 1
    assert [c.client_id for c in await clients.list_clients(auth, prefix="l")] == ["lingering"]
    with pytest.raises(ResourceNotFound):
        await clients.get_client(auth, "ephemeral")


async def test_access_tokens_are_stored_nowhere(auth: Auth, db_url: str) -> None:
    tokens = [(await clients.create_client(auth, "secretive", spec("a"), guard=ALLOW_ALL))[1]]
    tokens.append((await clients.reset_access_token(auth, "secretive"))[1])
    tokens.append((await clients.create_client(auth, "other", spec(), guard=ALLOW_ALL))[1])
    await roles.create_role(auth, "r", "d", ["a"], guard=ALLOW_ALL)
    dump = await database_text(db_url)
    assert "secretive" in dump  # the dump does hold the clients' rows
    for token in tokens:
        assert token not in dump
        assert token[:22] not in dump and token[22:] not in dump


async def database_text(db_url: str) -> str:
    """Every row of every table, as text."""
    if db_url.startswith("sqlite"):
        with sqlite3.connect(db_url.removeprefix("sqlite:///")) as conn:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            return "\n".join(repr(row) for t in tables for row in conn.execute(f'SELECT * FROM "{t}"'))
    import asyncpg

    conn = await asyncpg.connect(db_url)
    try:
        tables = [
            r[0] for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        ]
        rows = [r[0] for t in tables for r in await conn.fetch(f'SELECT t::text FROM "{t}" t')]
    finally:
        await conn.close()
    return "\n".join(rows)


def test_tokens_are_derived_from_the_key_the_client_and_the_salt() -> None:
    token = client_token("key", "client", "salt")
    assert len(token) == 44 and token == client_token("key", "client", "salt")
    assert len({token, client_token("key2", "client", "salt"), client_token("key", "client2", "salt")}) == 3
    assert client_token("key", "client", "salt2") != token


async def test_a_process_with_another_secret_key_refuses_to_start(auth: Auth, storage: Storage) -> None:
    with pytest.raises(ConfigError, match="TASKYARD_SECRET_KEY"):
        await Auth(storage, secret_key=SECRET_KEY + "-other").start()
    await Auth(storage, secret_key=SECRET_KEY).start()


# ---------------------------------------------------------------------------------------------------
# Roles


async def test_role_crud_and_expansion(auth: Auth, clock: FakeClock) -> None:
    created = await roles.create_role(
        auth, "repo:x/*", "repo", ["secrets:get:<..>", "b", "a"], guard=ALLOW_ALL
    )
    assert created.scopes == ("a", "b", "secrets:get:<..>")  # stored sorted
    assert (
        await roles.create_role(auth, "repo:x/*", "repo", ["b", "a", "secrets:get:<..>"], guard=ALLOW_ALL)
        == created
    )
    with pytest.raises(RequestConflict):
        await roles.create_role(auth, "repo:x/*", "repo", ["a"], guard=ALLOW_ALL)
    with pytest.raises(RequestConflict):
        await roles.create_role(auth, "repo:x/*", "other", ["a", "b", "secrets:get:<..>"], guard=ALLOW_ALL)
    assert await auth.expand(["assume:repo:x/main"]) == ["a", "assume:repo:x/main", "b", "secrets:get:main"]
    assert [r.role_id for r in await roles.list_roles(auth)] == ["anonymous", "repo:x/*"]

    clock.advance(1)
    updated = await roles.update_role(auth, "repo:x/*", "changed", ["c"], guard=ALLOW_ALL)
    assert (updated.scopes, updated.description, updated.last_modified) == (("c",), "changed", clock())
    assert await auth.expand(["assume:repo:x/y"]) == ["assume:repo:x/y", "c"]
    with pytest.raises(ResourceNotFound):
        await roles.update_role(auth, "nobody", "d", [], guard=ALLOW_ALL)

    await roles.delete_role(auth, "repo:x/*")
    await roles.delete_role(auth, "repo:x/*")
    with pytest.raises(ResourceNotFound):
        await roles.get_role(auth, "repo:x/*")
    assert await auth.expand(["assume:repo:x/y"]) == ["assume:repo:x/y"]


async def test_the_anonymous_role_lets_everyone_read_public_artifacts(auth: Auth) -> None:
    anonymous = await roles.get_role(auth, "anonymous")
    assert anonymous.scopes == ("queue:get-artifact:public/*",)
    assert await auth.expand(["assume:anonymous"]) == ["assume:anonymous", "queue:get-artifact:public/*"]


async def test_cycles_and_ambiguous_parameters_are_refused(auth: Auth) -> None:
    await roles.create_role(auth, "a", "d", ["assume:b"], guard=ALLOW_ALL)
    with pytest.raises(InputError, match="found: 'assume:a' -> 'assume:b' -> 'assume:a'"):
        await roles.create_role(auth, "b", "d", ["assume:a"], guard=ALLOW_ALL)
    with pytest.raises(InputError, match="cycles"):
        await roles.create_role(auth, "self", "d", ["assume:self"], guard=ALLOW_ALL)
    await roles.create_role(auth, "b", "d", ["x"], guard=ALLOW_ALL)
    with pytest.raises(InputError, match="cycles"):
        await roles.update_role(auth, "b", "d", ["assume:a"], guard=ALLOW_ALL)
    with pytest.raises(InputError, match="multiple"):
        await roles.create_role(auth, "p*", "d", ["x<..>y<..>"], guard=ALLOW_ALL)
    with pytest.raises(InputError, match="ambiguous kleene"):
        await roles.create_role(auth, "q*", "d", ["x*<..>"], guard=ALLOW_ALL)
    assert [r.role_id for r in await roles.list_roles(auth)] == ["a", "anonymous", "b"]


# ---------------------------------------------------------------------------------------------------
# Caches: one process sees another's changes


async def test_changes_reach_the_caches_of_other_processes(auth: Auth, other_process: Auth) -> None:
    assert await other_process.expand(["assume:late"]) == ["assume:late"]  # cached without the role
    assert await other_process.lookup("late") is None
    await roles.create_role(auth, "late", "d", ["granted"], guard=ALLOW_ALL)
    _, token = await clients.create_client(auth, "late", spec("x"), guard=ALLOW_ALL)
    await poll_until(lambda: other_process.expand(["assume:late"]), ["assume:late", "granted"])
    secret = await other_process.lookup("late")
    assert secret is not None and secret.access_token == token

    _, new = await clients.reset_access_token(auth, "late")
    await poll_until(lambda: token_of(other_process, "late"), new)
    await clients.delete_client(auth, "late")
    await poll_until(lambda: token_of(other_process, "late"), None)


async def token_of(auth: Auth, client_id: str) -> str | None:
    secret = await auth.lookup(client_id)
    return None if secret is None else secret.access_token

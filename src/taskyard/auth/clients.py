"""Clients: create, read, list, update, enable, disable, reset the access token, delete, expire.

Every change runs in `Auth.change()`. Creating the same client again is idempotent (same
settings within 15 minutes: the same client and token); anything else is a 409. Clients whose
id starts with `static/` are built in and cannot be changed. createClient and updateClient
take the route's `Guard` and call it where TaskCluster checks the caller's scopes: after the
input checks, with `scopes` the new client's scopes; and for an update inside the transaction,
once the client's current scopes are read, with `scopesAdded` the scopes it gains.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from taskyard.auth import hawk
from taskyard.auth.service import Auth, new_salt, scopes_from
from taskyard.model import dates
from taskyard.model.errors import InputError, RequestConflict, ResourceNotFound, TaskyardError
from taskyard.model.guard import Guard
from taskyard.storage.port import Row, Session

log = logging.getLogger(__name__)
STATIC_PREFIX = "static/"
IDEMPOTENT_WINDOW_MS = 15 * dates.MINUTE
STATIC_EXPIRES = dates.parse_iso("3000-01-01T00:00:00.000Z")


@dataclass(frozen=True)
class ClientSpec:
    """What createClient and updateClient take; `scopes` None on an update leaves them as they are."""

    description: str
    expires: int
    scopes: tuple[str, ...] | None = None
    delete_on_expiration: bool = False


@dataclass(frozen=True)
class Client:
    """A client as stored, without any secret."""

    client_id: str
    description: str
    scopes: tuple[str, ...]
    expires: int
    disabled: bool
    delete_on_expiration: bool
    created: int
    last_modified: int
    last_date_used: int
    last_rotated: int


def client_from_row(row: Row) -> Client:
    return Client(
        client_id=row["client_id"],
        description=row["description"],
        scopes=scopes_from(row),
        expires=row["expires"],
        disabled=bool(row["disabled"]),
        delete_on_expiration=bool(row["delete_on_expiration"]),
        created=row["created"],
        last_modified=row["last_modified"],
        last_date_used=row["last_date_used"],
        last_rotated=row["last_rotated"],
    )


def static_client(secret: hawk.ClientSecret, since: int) -> Client:
    """A built-in client, shown as TaskCluster shows its static clients; `since`: when it was loaded."""
    return Client(
        client_id=secret.client_id,
        description="Built-in client of this deployment (static: it cannot be changed through the API).",
        scopes=secret.scopes,
        expires=STATIC_EXPIRES if secret.expires_ms is None else secret.expires_ms,
        disabled=secret.disabled,
        delete_on_expiration=False,
        created=since,
        last_modified=since,
        last_date_used=since,
        last_rotated=since,
    )


def check_scopes(scopes: Sequence[str], field: str = "scopes") -> None:
    """400 if a scope ends in `**` (it would mean the same as `*`, so it is refused as a mistake)."""
    for scope in scopes:
        if scope.endswith("**"):
            raise InputError(f"{field} must not end with `**`: {scope[:200]!r}")


def _check_changeable(client_id: str) -> None:
    if client_id.startswith(STATIC_PREFIX):
        raise InputError(
            f"clientId {client_id!r} starts with {STATIC_PREFIX!r}, which is kept for the built-in "
            "clients; they cannot be changed through the API"
        )


def _dumps(scopes: Sequence[str]) -> str:
    return orjson.dumps(list(scopes)).decode()


# ---------------------------------------------------------------------------------------------------
# Reads.


async def get_client(auth: Auth, client_id: str) -> Client:
    """The client, or 404."""
    static = auth.static_clients.get(client_id)
    if static is not None:
        return static_client(static, auth.started)
    async with auth.storage.reader() as session:
        return await _require(session, client_id)


async def list_clients(auth: Auth, *, prefix: str = "", after: str = "", limit: int = 1000) -> list[Client]:
    """Up to `limit + 1` clients with ids after `after` that start with `prefix`, by clientId.

    The extra one tells the caller there are more.
    """
    async with auth.storage.reader() as session:
        rows = await session.fetch("list_clients", after, prefix, limit + 1)
    found = [client_from_row(row) for row in rows]
    found += [
        static_client(secret, auth.started)
        for client_id, secret in auth.static_clients.items()
        if client_id > after and client_id.startswith(prefix)
    ]
    return sorted(found, key=lambda c: c.client_id)[: limit + 1]


async def _require(session: Session, client_id: str) -> Client:
    row = await session.fetchrow("get_client", client_id)
    if row is None:
        raise ResourceNotFound(f"client {client_id!r} does not exist")
    return client_from_row(row)


# ---------------------------------------------------------------------------------------------------
# Changes.


async def create_client(auth: Auth, client_id: str, spec: ClientSpec, *, guard: Guard) -> tuple[Client, str]:
    """Create the client; answer it with its access token, the only time the token is shown.

    Idempotent: the same settings again within 15 minutes answer the same client and token.
    `guard` gets `scopes`, which the caller must hold.
    """
    _check_changeable(client_id)
    scopes = spec.scopes or ()
    check_scopes(scopes)
    guard(scopes=list(scopes))
    now = auth.clock()
    async with auth.change() as tx:
        inserted = await tx.execute(
            "insert_client",
            client_id=client_id,
            description=spec.description,
            scopes=_dumps(scopes),
            token_salt=new_salt(),
            expires=spec.expires,
            delete_on_expiration=spec.delete_on_expiration,
            now=now,
        )
        row = await tx.fetchrow("get_client", client_id)
        assert row is not None
        client = client_from_row(row)
        if not inserted and not _same(client, spec, scopes, now):
            raise RequestConflict(
                f"client {client_id!r} already exists with other settings (or was made more than 15 "
                "minutes ago); updateClient changes a client"
            )
    return client, auth.token_for(client_id, row["token_salt"])


def _same(client: Client, spec: ClientSpec, scopes: Sequence[str], now: int) -> bool:
    return (
        client.description == spec.description
        and client.expires == spec.expires
        and client.scopes == tuple(scopes)
        and client.delete_on_expiration == spec.delete_on_expiration
        and not client.disabled
        and client.created >= now - IDEMPOTENT_WINDOW_MS
    )


async def update_client(auth: Auth, client_id: str, spec: ClientSpec, *, guard: Guard) -> Client:
    """Change the client's description, expiry and (unless `spec.scopes` is None) scopes; 404 if absent.

    `guard` gets `scopesAdded`, the scopes being added, which the caller must hold.
    """
    _check_changeable(client_id)
    check_scopes(spec.scopes or ())
    async with auth.change() as tx:
        current = await _require(tx, client_id)
        scopes = current.scopes if spec.scopes is None else spec.scopes
        guard(scopesAdded=[s for s in scopes if s not in current.scopes])
        await tx.execute(
            "update_client",
            client_id=client_id,
            description=spec.description,
            scopes=_dumps(scopes),
            expires=spec.expires,
            delete_on_expiration=spec.delete_on_expiration,
            now=auth.clock(),
        )
        return await _require(tx, client_id)


async def enable_client(auth: Auth, client_id: str) -> Client:
    """Let the client authenticate again; enabling an enabled client does nothing."""
    return await _set_disabled(auth, client_id, False)


async def disable_client(auth: Auth, client_id: str) -> Client:
    """Refuse the client's requests (401) until it is enabled; disabling twice does nothing."""
    return await _set_disabled(auth, client_id, True)


async def _set_disabled(auth: Auth, client_id: str, disabled: bool) -> Client:
    _check_changeable(client_id)
    async with auth.change() as tx:
        await _require(tx, client_id)
        await tx.execute("set_client_disabled", client_id, disabled)
        return await _require(tx, client_id)


async def reset_access_token(auth: Auth, client_id: str) -> tuple[Client, str]:
    """Give the client a new access token and answer it; the old one stops working at once."""
    _check_changeable(client_id)
    salt = new_salt()
    async with auth.change() as tx:
        await _require(tx, client_id)
        await tx.execute("rotate_client_token", client_id, salt, auth.clock())
        client = await _require(tx, client_id)
    return client, auth.token_for(client_id, salt)


async def delete_client(auth: Auth, client_id: str) -> None:
    """Delete the client; deleting one that does not exist succeeds too."""
    _check_changeable(client_id)
    async with auth.change() as tx:
        await tx.execute("delete_client", client_id)


async def delete_expired_clients(auth: Auth) -> int:
    """Delete the clients that asked for it (deleteOnExpiration) and have expired; answer how many."""
    now = auth.clock()
    async with auth.storage.reader() as session:
        if not await session.fetch("expired_clients", now, 1):
            return 0  # the usual case: no change, so no cache anywhere is dropped
    async with auth.change() as tx:
        return await tx.execute("expire_clients", now)


async def expire_clients_forever(auth: Auth, interval: float) -> None:
    """Run `delete_expired_clients` every `interval` seconds until cancelled."""
    while True:
        try:
            await delete_expired_clients(auth)
        except TaskyardError as exc:
            log.warning("could not delete expired clients: %s", exc)
        await asyncio.sleep(interval)

"""Set, get, remove and list secrets; sweep expired ones; re-seal values under the current key.

A secret's value is a JSON object, sealed before it reaches storage (`crypto.py`) and opened only
to answer `get`. Neither the value nor its sealed form is logged: log lines name the secret and
the caller, as TaskCluster's audit entries do.
"""

from __future__ import annotations

import logging
from typing import TypedDict

import orjson

from taskyard.model import dates, paging
from taskyard.model.errors import InvalidRequestArguments, ResourceNotFound
from taskyard.model.types import JSONObject, Millis
from taskyard.secrets.crypto import Unreadable
from taskyard.secrets.service import Secrets

log = logging.getLogger(__name__)

MAX_NAME_LENGTH = 256  # characters of a secret's name (a list's continuationToken holds one)


class SecretBody(TypedDict):
    """What `get` answers, and what `set` takes."""

    secret: JSONObject
    expires: str


class SecretList(paging.Page):
    """A page of `list`: names, in order."""

    secrets: list[str]


class SecretEntry(TypedDict):
    """A secret as the web UI lists it: its name and expiry, never its value."""

    name: str
    expires: str


def check_name(name: str) -> None:
    """400 for a name too long to be one; the route's pattern has already refused the rest
    (empty, or other than printable ASCII, which every scope must be)."""
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidRequestArguments(
            f"URL parameter name must be at most {MAX_NAME_LENGTH} characters (got {len(name)})"
        )


async def set_secret(s: Secrets, name: str, value: JSONObject, expires: Millis, *, client_id: str) -> None:
    """Create or replace `name`'s value and expiry. An expiry in the past is allowed: the secret
    is then simply not readable (nor listed), and the sweep deletes it."""
    check_name(name)
    key_id, sealed = s.sealer.seal(name, orjson.dumps(value))
    now = s.clock()
    async with s.storage.transaction() as tx:
        created = await tx.fetchval("set_secret", name, key_id, sealed, expires, now)
    log.info("secret %r %s by %s", name, "created" if created == now else "updated", client_id)


async def get_secret(s: Secrets, name: str) -> SecretBody:
    """`name`'s value and expiry; 404 if there is none, or it has expired (as TaskCluster does)."""
    check_name(name)
    async with s.storage.reader() as session:
        row = await session.fetchrow("get_secret", name, s.clock())
    if row is None:
        raise ResourceNotFound(f"secret {name!r} not found (or expired)")
    try:
        value = orjson.loads(s.sealer.open(name, row["key_id"], row["sealed"]))
    except Unreadable as exc:
        log.warning("%s", exc.message)
        raise
    return {"secret": value, "expires": dates.to_iso(row["expires"])}


async def remove_secret(s: Secrets, name: str, *, client_id: str) -> None:
    """Delete `name`; removing a secret that isn't there succeeds too."""
    check_name(name)
    async with s.storage.transaction() as tx:
        removed = await tx.execute("remove_secret", name)
    if removed:
        log.info("secret %r deleted by %s", name, client_id)


async def list_secrets(s: Secrets, *, after: str, limit: int) -> list[SecretEntry]:
    """Up to `limit + 1` unexpired secrets named after `after`, by name (the extra one says
    there are more)."""
    async with s.storage.reader() as session:
        rows = await session.fetch("list_secrets", after, s.clock(), limit + 1)
    return [{"name": row["name"], "expires": dates.to_iso(row["expires"])} for row in rows]


async def sweep_expired(s: Secrets) -> int:
    """Delete one batch of expired secrets; how many went (the caller repeats while any do)."""
    async with s.storage.transaction() as tx:
        swept = await tx.execute("expire_secrets", s.clock(), s.sweep_batch)
    if swept:
        log.info("deleted %d expired secret(s)", swept)
    return swept


async def reseal(s: Secrets) -> int:
    """Re-seal one batch of values the old key sealed under the current key; how many were.

    Only with an old key: values under a key the server doesn't hold at all are left as they are.
    """
    old = s.sealer.old
    if old is None:
        return 0
    async with s.storage.transaction() as tx:
        rows = await tx.fetch("secrets_sealed_with", old, s.reseal_batch)
        resealed = 0
        for row in rows:
            try:
                plaintext = s.sealer.open(row["name"], old, row["sealed"])
            except Unreadable as exc:  # altered: left as it is, and said once per round
                log.warning("%s", exc.message)
                continue
            key_id, sealed = s.sealer.seal(row["name"], plaintext)
            resealed += await tx.execute("reseal_secret", row["name"], row["sealed"], key_id, sealed)
    if resealed:
        log.info("re-sealed %d secret(s) under the current secret key", resealed)
    elif not rows and not s.resealed_all:
        s.resealed_all = True
        log.info("every secret is sealed under the current secret key: TASKYARD_OLD_SECRET_KEY may go")
    return resealed


async def upkeep(s: Secrets) -> int:
    """One round of the background work: a batch of the expiry sweep and one of re-sealing."""
    return await sweep_expired(s) + await reseal(s)

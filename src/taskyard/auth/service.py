"""The auth service's shared machinery: the `Auth` object, its caches, and authenticating requests.

Clients and roles live in the database, beside the queue's tables; `clients.py` and `roles.py`
change them, each change inside `Auth.change()`. Every process keeps the role set and the client
secrets it has looked up in memory, and the temporary credentials it has checked (each used only
while its issuer's record and the role set are the very ones it was checked with). A change
bumps the one-row `auth_generation` counter in its own transaction and notifies `auth_changed`
when it commits: this process drops its caches at once, other processes when the notification
reaches them and, should one be lost (SQLite has no notifications between processes), when they
re-read the counter, at most every few seconds.

Access tokens are never stored. A client's token is derived from the deployment's secret key and
the client's random `token_salt`; a new salt (resetAccessToken) revokes the old token.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import logging
import re
import secrets
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass

import orjson

from taskyard.auth import hawk
from taskyard.auth.nonces import SeenRequests
from taskyard.model import dates, identifiers
from taskyard.model.errors import ConfigError, Unavailable
from taskyard.model.roles import Role, RoleSet
from taskyard.model.types import Clock
from taskyard.storage import port as storage_port
from taskyard.storage.port import Row, Storage, Tx

log = logging.getLogger(__name__)
AUTH_CHANNEL = "auth_changed"
RECHECK_SECONDS = 3.0  # the longest a process trusts its caches without re-reading the generation
TOUCH_INTERVAL_MS = 6 * dates.HOUR  # lastDateUsed is kept up to date to within this
MAX_CACHED_CLIENTS = 10_000
_CLIENT_ID = re.compile(identifiers.CLIENT_ID)


def client_token(secret_key: str, client_id: str, salt: str) -> str:
    """The access token of `client_id` with `salt`: 44 URL-safe characters, like two slugids."""
    mac = hmac.new(secret_key.encode(), f"client-token:{client_id}:{salt}".encode(), hashlib.sha256).digest()
    return _b64(mac[:16]) + _b64(mac[16:])


def new_salt() -> str:
    return secrets.token_urlsafe(24)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def scopes_from(row: Row) -> tuple[str, ...]:
    return tuple(orjson.loads(row["scopes"]))


@dataclass
class _CachedClient:
    secret: hawk.ClientSecret
    last_used: int


class Auth:
    """Clients and roles in storage, with in-memory caches that every change invalidates."""

    def __init__(
        self,
        storage: Storage,
        *,
        secret_key: str,
        static_clients: Mapping[str, hawk.ClientSecret] | None = None,
        clock: Clock = dates.now_ms,
        recheck_seconds: float = RECHECK_SECONDS,
    ) -> None:
        if not secret_key:
            raise ConfigError("secret-key", "", "must not be empty")
        self.storage = storage
        self.clock = clock
        self.static_clients = dict(static_clients or {})
        self.started = clock()  # shown as the static clients' creation date
        self._secret_key = secret_key
        self._recheck_seconds = recheck_seconds
        self.seen_requests = SeenRequests(hawk.TIMESTAMP_SKEW_MS)  # replays are refused
        self._epoch = 0  # bumped by every invalidation; a load begun in an older epoch is not kept
        self._generation: int | None = None
        self._checked = 0.0
        self._role_set: RoleSet | None = None
        self._clients: dict[str, _CachedClient] = {}
        self.verified = hawk.VerifiedCredentials(MAX_CACHED_CLIENTS)  # temporary credentials checked
        self._loading = asyncio.Lock()

    def __repr__(self) -> str:
        return f"Auth({self.storage.url_for_humans})"

    async def start(self) -> None:
        """Check the secret key against the database's, then follow changes made by other processes."""
        await self._check_secret_key()
        await self.storage.listen(AUTH_CHANNEL, self._on_notification)

    def token_for(self, client_id: str, salt: str) -> str:
        return client_token(self._secret_key, client_id, salt)

    # -------------------------------------------------------------------------------------------
    # Lookups, as authentication needs them.

    async def lookup(self, client_id: str) -> hawk.ClientSecret | None:
        """The client's secret (static clients first), or None; hawk refuses disabled or expired ones.

        An id no client can have (a NUL, which PostgreSQL's text refuses, from a certificate's
        issuer or a bewit) is None without a query."""
        static = self.static_clients.get(client_id)
        if static is not None:
            return static
        if _CLIENT_ID.fullmatch(client_id) is None:
            return None
        await self._ensure_fresh()
        cached = self._clients.get(client_id)
        if cached is None:
            cached = await self._load_client(client_id)
            if cached is None:
                return None
        await self._touch(cached)
        return cached.secret

    async def role_set(self) -> RoleSet:
        """Every role, indexed for expansion."""
        await self._ensure_fresh()
        role_set = self._role_set
        if role_set is None:
            async with self._loading:  # one load for all the requests that find the cache empty
                role_set = self._role_set
                if role_set is None:
                    role_set = await self._load_roles()
        return role_set

    async def expand(self, scopes: Iterable[str]) -> list[str]:
        """`scopes` and everything their roles grant, normalized."""
        return (await self.role_set()).expand(scopes)

    async def authenticate(
        self, request: hawk.Request, *, check_payload: bool = True, remember: bool = False
    ) -> hawk.Authenticated | None:
        """Check a request's Hawk header or bewit against the clients; None if it carries neither.

        A header accepted before by this process is refused (`auth/nonces.py`). With `remember`
        (the API's own requests), the calling task is the request's, and the header's MAC is
        recorded in the database with that task's first transaction (`storage.port`, Replays):
        a replay that changes something is refused after a restart and by every process of the
        deployment too. A bewit is meant to be used again until it expires: it is not recorded."""
        if remember:
            storage_port.remember_signed_request(None, 0)  # whatever this task served before
        role_set = await self.role_set()
        # Hawk compares the request's timestamp with the wall clock, whatever clock `Auth` keeps.
        who = await hawk.authenticate(
            request,
            self.lookup,
            now_ms=dates.now_ms(),
            expand=role_set.expand,
            check_payload=check_payload,
            seen=self.seen_requests,
            verified=self.verified,
        )
        if remember and who is not None and who.replay_key is not None:
            storage_port.remember_signed_request(*who.replay_key)
        return who

    # -------------------------------------------------------------------------------------------
    # Changes.

    @contextlib.asynccontextmanager
    async def change(self) -> AsyncIterator[Tx]:
        """A transaction changing clients or roles: serialised with the others; every cache hears of it."""
        async with self.storage.transaction() as tx:
            generation = await tx.fetchval("bump_auth_generation")
            tx.notify(AUTH_CHANNEL, str(generation))
            tx.after_commit(self.invalidate)
            yield tx

    def invalidate(self) -> None:
        """Forget every cached client and role; the next lookup reads them again."""
        self._epoch += 1
        self._generation = None
        self._role_set = None
        self._clients.clear()
        self.verified.clear()

    def _on_notification(self, _payload: str | None) -> None:
        self.invalidate()  # None (notifications may have been lost) too: something may have changed

    # -------------------------------------------------------------------------------------------
    # Caches.

    async def _ensure_fresh(self) -> None:
        """Re-read the generation if it is time to; drop the caches if another process changed it."""
        if self._generation is not None and time.monotonic() - self._checked < self._recheck_seconds:
            return
        epoch = self._epoch
        async with self.storage.reader() as session:
            generation = await session.fetchval("get_auth_generation")
        if epoch != self._epoch:
            return  # invalidated meanwhile: the next call reads the generation again
        if generation != self._generation:
            self.invalidate()
        self._generation, self._checked = generation, time.monotonic()

    async def _load_roles(self) -> RoleSet:
        epoch = self._epoch
        async with self.storage.reader() as session:
            rows = await session.fetch("list_roles")
        role_set = RoleSet(Role(row["role_id"], scopes_from(row)) for row in rows)
        if epoch == self._epoch:  # else it may predate a change: use it for this request only
            self._role_set = role_set
        return role_set

    async def _load_client(self, client_id: str) -> _CachedClient | None:
        epoch = self._epoch
        async with self.storage.reader() as session:
            row = await session.fetchrow("get_client", client_id)
        if row is None:
            return None
        secret = hawk.ClientSecret(
            client_id,
            self.token_for(client_id, row["token_salt"]),
            scopes_from(row),
            row["expires"],
            bool(row["disabled"]),
        )
        cached = _CachedClient(secret, row["last_date_used"])
        if epoch == self._epoch:
            if len(self._clients) >= MAX_CACHED_CLIENTS:
                self._clients.clear()
            self._clients[client_id] = cached
        return cached

    async def _touch(self, cached: _CachedClient) -> None:
        """Record that the client was used, at most once per TOUCH_INTERVAL_MS (no cache invalidation)."""
        now = self.clock()
        if now - cached.last_used < TOUCH_INTERVAL_MS:
            return
        cached.last_used = now
        try:
            async with self.storage.transaction() as tx:
                await tx.execute("touch_client", cached.secret.client_id, now)
        except Unavailable as exc:  # only bookkeeping: never refuse a request for it
            log.warning("could not record that client %s was used: %s", cached.secret.client_id, exc)

    async def _check_secret_key(self) -> None:
        check = base64.b64encode(
            hmac.new(self._secret_key.encode(), b"taskyard-secret-check", hashlib.sha256).digest()
        ).decode()
        async with self.storage.transaction() as tx:
            await tx.execute("claim_auth_secret_check", check)
            stored = await tx.fetchval("get_auth_secret_check")
        if not hmac.compare_digest(stored, check):
            raise ConfigError(
                "secret-key",
                "(hidden)",
                "differs from the key the database's clients were made with: give every process "
                "of a deployment the same TASKYARD_SECRET_KEY",
            )

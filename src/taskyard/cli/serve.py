"""Running the server: storage, queue, event relay, resolvers and the HTTP API in one process.

`running()` is the composition root: it opens and builds every object the server is made of,
each one whole, in the order they need each other, and closes them in the reverse order.
`serve()` opens it, then serves its app with uvicorn until a signal stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import os
import socket
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import FrameType

import uvicorn

from taskyard.api.app import App, Services, build_app
from taskyard.api.shedding import Limits
from taskyard.artifacts import open_blob_store
from taskyard.auth import clients, static
from taskyard.auth.service import Auth
from taskyard.cli.connections import (
    forwarded_headers,
    raise_open_files_limit,
    trusted_proxies,
    with_head_timeout,
)
from taskyard.cli.settings import worker_events
from taskyard.cli.startup import STARTUP_FAILURE, StartupFailed
from taskyard.config import ServerConfig
from taskyard.events import log as event_log
from taskyard.events import open_bus
from taskyard.events.feed import EventFeed
from taskyard.events.outbox import OutboxRelay
from taskyard.events.profiles import Profiles
from taskyard.hooks import bindings as hook_bindings
from taskyard.hooks import definitions as hook_definitions
from taskyard.hooks import firing as hook_firing
from taskyard.hooks.service import Hooks
from taskyard.index import indexing
from taskyard.lockfile import Lock
from taskyard.model.errors import ConfigError, TaskyardError
from taskyard.model.notify_routes import Email
from taskyard.model.owner_mail import OwnerMail
from taskyard.notify import deliveries, mail, sending
from taskyard.notify.service import Notify
from taskyard.pools import own, provisioner
from taskyard.pools.local import LocalProvider
from taskyard.pools.own import OwnPool
from taskyard.pools.port import Provider
from taskyard.pools.service import NULL_PROVIDER, WorkerManager
from taskyard.pools.static import NullProvider, StaticProvider
from taskyard.queue import livelogs, poll, resolvers
from taskyard.queue.service import Queue
from taskyard.queue.signals import Followers, PendingSignals
from taskyard.scheduler import reactions
from taskyard.scheduler.service import Scheduler
from taskyard.secrets import store as secret_store
from taskyard.secrets.service import Secrets
from taskyard.storage import open_storage
from taskyard.ui.app import Pages

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Deployment:
    """A started server: the app that serves its API, and the live-log followers, event streams
    and claimWork long polls to end first when it stops."""

    app: App
    live_log_followers: Followers
    event_feed: EventFeed
    worker_manager: WorkerManager
    claim_signals: PendingSignals


@contextlib.asynccontextmanager
async def running(
    config: ServerConfig, *, own_pool: OwnPool | None = None, keep_fds: tuple[int, ...] = ()
) -> AsyncIterator[Deployment]:
    """Open storage, auth and the bus, build the queue and the app on them, and start the relay
    and the background loops; on exit, stop the loops, then close the bus, then storage.

    `own_pool`: `up`'s local pool, created or set to its flags. `keep_fds` are handed to the
    local workers (the data directory's lock, held until the last of them is gone)."""
    async with contextlib.AsyncExitStack() as opened:
        blobs = open_blob_store(
            config.artifacts_url,
            root_url=config.blob_url,
            secret_key=config.secret_key,
            max_bytes=config.max_artifact_bytes,
        )
        storage = await open_storage(config.db_url)
        opened.push_async_callback(storage.close)
        auth = Auth(
            storage,
            secret_key=config.secret_key,
            static_clients=static.static_clients(config.root_access_token),
        )
        await auth.start()
        bus = await open_bus(config.events, profiles=config.event_profiles, root_url=config.root_url)
        opened.push_async_callback(bus.close)
        relay = OutboxRelay(storage, bus)
        feed = EventFeed(storage, Profiles(config.event_profiles, root_url=config.root_url))
        await feed.start()
        opened.push_async_callback(feed.close)
        queue = Queue(
            storage,
            config.queue,
            credentials_issuer=(
                static.QUEUE_CLIENT_ID,
                static.derived_token(config.root_access_token, static.QUEUE_CLIENT_ID),
            ),
            blobs=blobs,
            live_log_urls=livelogs.StreamUrls(config.blob_url, config.secret_key),
            poll_keys=poll.PollKeys(config.root_url, config.secret_key),
            events_committed=relay.kick,
        )
        await queue.start()
        if backfilled := await poll.backfill_messages(queue):
            log.info("gave %d pending run(s) of an older database their poll messages", backfilled)
        scheduler = Scheduler(
            queue, expand=auth.expand, scheduler_id=config.scheduler_id, root_url=config.root_url
        )
        unsubscribe = reactions.subscribe(scheduler, bus, config.event_profiles)
        secrets = Secrets(storage, secret_key=config.secret_key, old_secret_key=config.old_secret_key)
        notifier = Notify(
            queue, mail.parse_url(config.smtp_url) if config.smtp_url else None, ui_url=config.root_url
        )
        owner_mail = OwnerMailer(notifier)
        hooks = Hooks(queue, expand=auth.expand, sealer=secrets.sealer, bus=bus, mail=owner_mail)
        worker_manager = _worker_manager(config, queue, keep_fds, owner_mail)
        await worker_manager.start()
        if own_pool is not None:
            await own.ensure(worker_manager, own_pool)
        services = Services(
            queue,
            auth,
            scheduler,
            secrets,
            max_body_bytes=config.queue.max_body_bytes,
            root_url=config.root_url,
            blob_origin=config.blob_origin or None,
            events=feed,
            notifier=notifier,
            limits=Limits(
                config.max_in_flight,
                config.max_long_polls,
                config.db_wait_timeout,
                max_running=config.max_running,
                max_streams=config.max_streams,
                max_streams_per_client=config.max_streams_per_client,
                max_anonymous_streams_per_client=config.max_anonymous_streams_per_client,
            ),
            hooks_service=hooks,
            worker_manager_service=worker_manager,
        )
        await services.index.start()
        await services.notify.start()
        app = build_app(services, site=Pages(services))  # the web UI, built on its first request
        loops = [
            asyncio.create_task(relay.run(), name="outbox-relay"),
            asyncio.create_task(
                event_log.prune_forever(storage, config.event_retention), name="event-log-pruner"
            ),
            *resolvers.start_all(queue),
            asyncio.create_task(reactions.run_forever(scheduler), name="task-graph-scheduler"),
            asyncio.create_task(indexing.run_forever(services.index), name="indexer"),
            asyncio.create_task(indexing.sweep_forever(services.index), name="index-expiry"),
            asyncio.create_task(deliveries.run_forever(services.notify), name="notifier"),
            asyncio.create_task(deliveries.send_forever(services.notify), name="notify-sender"),
            asyncio.create_task(
                clients.expire_clients_forever(auth, config.queue.expiry_interval), name="client-expiry"
            ),
            asyncio.create_task(
                resolvers.run_forever(
                    "secrets-upkeep",
                    lambda: secret_store.upkeep(secrets),
                    config.queue.expiry_interval,
                    lead=storage.lead,
                ),
                name="secrets-upkeep",
            ),
            *_hook_loops(hooks, config.queue.expiry_interval),
            asyncio.create_task(provisioner.run_forever(worker_manager), name="worker-manager-provisioner"),
            asyncio.create_task(
                resolvers.run_forever(
                    "worker-manager-upkeep",
                    lambda: provisioner.upkeep(worker_manager),
                    config.queue.expiry_interval,
                    lead=storage.lead,
                ),
                name="worker-manager-upkeep",
            ),
        ]
        opened.push_async_callback(_stop, loops)
        opened.callback(unsubscribe)
        yield Deployment(app, queue.live_log_followers, feed, worker_manager, queue.signals)


class OwnerMailer:
    """Mail to a hook's or a pool's owner about an error, sent in the background through the notify
    service (as its `email` call sends: the denylist, the rate limit and duplicates hold); without
    an SMTP server, a log line says what was not sent."""

    def __init__(self, notifier: Notify) -> None:
        self._notifier = notifier
        self._sending: set[asyncio.Task[None]] = set()

    def __call__(self, address: str, subject: str, content: str) -> None:
        if self._notifier.smtp is None:
            log.info("no mail to %s (%s): no --smtp-url", address, subject)
            return
        task = asyncio.create_task(self._send(address, subject, content))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, address: str, subject: str, content: str) -> None:
        try:
            await sending.email(self._notifier, address, Email(subject, content, None))
        except TaskyardError as exc:
            log.warning("mail to %s (%s) not sent: %s", address, subject, exc.message)


def _worker_manager(
    config: ServerConfig, queue: Queue, keep_fds: tuple[int, ...], owner_mail: OwnerMail
) -> WorkerManager:
    """The worker-manager with its providers: static, local (workers on this machine) and null."""
    local = LocalProvider(
        root_url=config.root_url,
        data_dir=config.data_dir,
        events=worker_events(config.events),
        keep_fds=keep_fds,
        log_level=os.environ.get("TASKYARD_LOG_LEVEL", ""),
    )
    providers: dict[str, Provider] = {
        "static": StaticProvider(),
        "local": local,
        NULL_PROVIDER: NullProvider(),
    }
    issuer = (
        static.WORKER_MANAGER_CLIENT_ID,
        static.derived_token(config.root_access_token, static.WORKER_MANAGER_CLIENT_ID),
    )
    return WorkerManager(queue, providers=providers, issuer=issuer, mail=owner_mail)


def _hook_loops(hooks: Hooks, expiry_interval: float) -> list[asyncio.Task[None]]:
    """The hooks service's loops: the scheduler (in the leading process), the bindings' consumers
    (in every process), the expiry of year-old last fires and the re-sealing of trigger tokens
    after a change of secret key (in the leading process)."""
    lead = hooks.storage.lead
    return [
        asyncio.create_task(
            resolvers.run_forever(
                "hooks-scheduler", lambda: hook_firing.fire_due(hooks), hooks.tick, hooks.changed, lead=lead
            ),
            name="hooks-scheduler",
        ),
        asyncio.create_task(hook_bindings.run_forever(hooks), name="hook-bindings"),
        asyncio.create_task(
            resolvers.run_forever(
                "hooks-expiry", lambda: hook_definitions.upkeep(hooks), expiry_interval, lead=lead
            ),
            name="hooks-expiry",
        ),
    ]


FULL_COLLECTIONS_EVERY = 100  # the collector's third threshold: Python's default is 10


def settle_collector() -> None:
    """Set the cyclic garbage collector for a server that holds thousands of connections.

    A full collection walks every object the process holds, with the event loop stopped: under
    load (2,000 claimWork long polls, 1,000 idle connections, 200 createTask callers) some 250,000
    objects, 100 to 250 ms each time, and Python's defaults ran one every second or two, each a
    stall of every request and ping. So: what start-up made (modules, routes, caches: 50,000
    objects, that live as long as the process) is frozen out of every collection (`gc.freeze`),
    and a full collection waits for ten times as many younger ones as before. The young
    generations are collected as often as ever, so garbage that dies young (almost all of a
    request's) goes as soon as before; garbage that outlived two collections waits longer."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTIONS_EVERY)


def bind(host: str, port: int) -> socket.socket:
    """The server's socket, bound as uvicorn binds it; a port in use is a `StartupFailed`."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise StartupFailed(
                f"port {port} on {host} is in use: choose another with --port or TASKYARD_PORT"
            ) from None
        raise StartupFailed(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def database_problem(exc: BaseException, db_url: str) -> str | None:
    """What to tell the operator when opening the PostgreSQL database `db_url` failed with `exc`
    for a reason of theirs (not reachable, or no such database); None for anything else."""
    if not db_url.startswith(("postgresql://", "postgres://")):
        return None
    url = urllib.parse.urlsplit(db_url)
    host, port = url.hostname or "localhost", url.port or 5432
    user, name = url.username or "postgres", url.path.lstrip("/") or url.username or "postgres"
    causes: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and cause not in causes:
        causes.append(cause)
        cause = cause.__cause__ or cause.__context__
    if any(getattr(c, "sqlstate", None) == "3D000" for c in causes):  # invalid_catalog_name
        return (
            f"the database {name!r} does not exist on PostgreSQL at {host}:{port}; create it with:\n"
            f"createdb -h {host} -p {port} -U {user} {name}"
        )
    refused = next((c for c in causes if isinstance(c, OSError)), None)
    if refused is not None:
        why = refused.strerror or type(refused).__name__
        where = f"PostgreSQL at {host}:{port}"
        return f"cannot reach {where} ({why}): is it running? (--db or TASKYARD_DB says where)"
    return None


def start_up_failure(exc: Exception, db_url: str) -> StartupFailed | SystemExit:
    """What to raise when opening the deployment failed with `exc`: the operator's problem in a
    line or two, or (for anything unforeseen) the traceback logged and the start-up status."""
    message = database_problem(exc, db_url)
    if message is None:
        log.error("start-up failed", exc_info=exc)
        return SystemExit(STARTUP_FAILURE)
    log.debug("start-up failed", exc_info=exc)
    return StartupFailed(message)


async def migrate(config: ServerConfig) -> None:
    """Open the database (which brings its schema up to date) and close it again."""
    try:
        storage = await open_storage(config.db_url)
    except ConfigError:
        raise
    except Exception as exc:
        raise start_up_failure(exc, config.db_url) from None
    await storage.close()


async def _stop(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def serve(
    config: ServerConfig,
    *,
    banner: str | None = None,
    own_pool: OwnPool | None = None,
    lock: Lock | None = None,
    listening: socket.socket | None = None,
) -> None:
    """Serve the API until interrupted; with `own_pool`, `up`'s local pool of workers, which share
    `lock` (the data directory's) so that it stays held until the last of them is gone too.
    `listening` is a socket bound already (shared by the processes of `--processes`)."""
    open_files = raise_open_files_limit()  # a connection is a file: thousands of long polls need room
    log.debug("open-files limit: %d", open_files)
    async with contextlib.AsyncExitStack() as stack:
        if listening is None:
            listening = bind(config.host, config.port)  # before the database: a taken port is found at once
            stack.callback(listening.close)
        keep_fds = () if lock is None else (lock.fileno(),)
        try:
            deployment = await stack.enter_async_context(
                running(config, own_pool=own_pool, keep_fds=keep_fds)
            )
        except ConfigError:
            raise
        except Exception as exc:
            raise start_up_failure(exc, config.db_url) from None
        settle_collector()
        served = uvicorn.Config(
            deployment.app,
            host=config.host,
            port=config.port,
            log_level="warning",
            access_log=False,
            lifespan="off",  # the deployment is open before the server starts
            # httptools, hanging up on slow request heads and bodies
            http=with_head_timeout(
                config.head_timeout,
                config.body_timeout,
                per_client=config.max_connections_per_client,  # trusted proxies aside
                trusted=trusted_proxies(),
                counts=deployment.app.shedding.counts,
            ),
            timeout_keep_alive=config.keep_alive_timeout,
            # The app applies X-Forwarded-Proto/-For itself, for the hosts uvicorn would trust
            # (FORWARDED_ALLOW_IPS, else 127.0.0.1 and ::1), and only when a request carries one.
            proxy_headers=False,
            forwarded_allow_ips=trusted_proxies(),
        )
        deployment.app.trust_proxies(forwarded_headers(served.forwarded_allow_ips))
        server = _Server(served, deployment, close_deployment=stack.aclose)

        async def start() -> None:
            while not server.started:  # print only once the port is really ours
                await asyncio.sleep(0.05)
            if banner:
                print(banner, flush=True)

        starting = asyncio.create_task(start())
        try:
            await server.serve(sockets=[listening])
        finally:
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting


class _Server(uvicorn.Server):
    """uvicorn's server, serving an open deployment, which it closes once it has stopped serving
    (before uvicorn raises again the signal that stopped it). The first SIGINT or SIGTERM stops
    the local workers this process started before the API: their running tasks are resolved
    worker-shutdown (so they run again) while the API can still hear them."""

    def __init__(
        self,
        config: uvicorn.Config,
        deployment: Deployment,
        *,
        close_deployment: Callable[[], Awaitable[None]],
    ) -> None:
        super().__init__(config)
        self._followers = deployment.live_log_followers
        self._feed = deployment.event_feed
        self._claims = deployment.claim_signals
        self._worker_manager = deployment.worker_manager
        self._close_deployment = close_deployment
        self._loop = asyncio.get_running_loop()
        self.stopping = False  # the local workers are being stopped

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.stopping or not provisioner.workers_running(self._worker_manager):
            super().handle_exit(sig, frame)
            return
        self.stopping = True

        async def stop() -> None:
            try:
                await provisioner.release_all(self._worker_manager, final=True)
            finally:
                self.should_exit = True

        self._loop.call_soon_threadsafe(lambda: self._loop.create_task(stop()))

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """End live-log and event streams and claimWork long polls first: uvicorn waits for every
        open response before it stops, and theirs would otherwise stay open for as long as their
        clients follow (a long poll: up to its 20 s, its worker perhaps gone already). Say what is
        still answered if it takes longer than a moment. Then close the deployment: the loops,
        the bus, storage."""
        self._followers.close()
        self._feed.end_streams()
        self._claims.close()
        waiting = asyncio.create_task(self._say_what_it_waits_for())
        try:
            await super().shutdown(sockets)
        finally:
            waiting.cancel()
        await self._close_deployment()

    async def _say_what_it_waits_for(self) -> None:
        await asyncio.sleep(1.0)
        while self.server_state.tasks:
            log.warning(
                "stopping: waiting for %d request(s) still being answered (Ctrl-C again stops at once)",
                len(self.server_state.tasks),
            )
            await asyncio.sleep(5.0)

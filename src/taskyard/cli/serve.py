"""Running the server: storage, queue, event relay, resolvers and the HTTP API in one process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import FrameType

import uvicorn
from starlette.applications import Starlette

from taskyard.api.app import Services, build_app
from taskyard.artifacts import open_blob_store
from taskyard.auth import clients, static
from taskyard.auth.service import Auth
from taskyard.config import ServerConfig, WorkerConfig
from taskyard.events import open_bus
from taskyard.events.outbox import OutboxRelay
from taskyard.events.port import EventBus
from taskyard.lockfile import Lock
from taskyard.queue import livelogs, resolvers
from taskyard.queue.service import Queue
from taskyard.storage import open_storage

log = logging.getLogger(__name__)


@dataclass
class Running:
    """A started deployment: what tests and `up` reach into."""

    queue: Queue
    auth: Auth
    bus: EventBus
    relay: OutboxRelay
    tasks: list[asyncio.Task[None]]


@contextlib.asynccontextmanager
async def running(config: ServerConfig, *, background: bool = True) -> AsyncIterator[Running]:
    """Open storage and the bus, start the relay and resolvers; stop them all on exit."""
    blobs = open_blob_store(
        config.artifacts_url,
        root_url=config.root_url,
        secret_key=config.secret_key,
        max_bytes=config.max_artifact_bytes,
    )
    storage = await open_storage(config.db_url)
    auth = Auth(
        storage,
        secret_key=config.secret_key,
        static_clients=static.static_clients(config.root_access_token),
    )
    try:
        await auth.start()
    except BaseException:
        await storage.close()
        raise
    bus = await open_bus(config.events, profiles=config.event_profiles, root_url=config.root_url)
    relay = OutboxRelay(storage, bus)
    queue = Queue(
        storage,
        config.queue,
        credentials_issuer=(
            static.QUEUE_CLIENT_ID,
            static.derived_token(config.root_access_token, static.QUEUE_CLIENT_ID),
        ),
        blobs=blobs,
        live_log_urls=livelogs.StreamUrls(config.root_url, config.secret_key),
        events_committed=relay.kick,
    )
    await queue.start()
    tasks = [asyncio.create_task(relay.run(), name="outbox-relay")]
    if background:
        tasks += resolvers.start_all(queue)
        expiry = clients.expire_clients_forever(auth, config.queue.expiry_interval)
        tasks.append(asyncio.create_task(expiry, name="client-expiry"))
    try:
        yield Running(queue, auth, bus, relay, tasks)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await bus.close()
        await storage.close()


def application(config: ServerConfig, started: asyncio.Event | None = None) -> Starlette:
    """The ASGI app with its lifespan: opens everything at start-up, closes it at shutdown."""
    services = Services(queue=None, auth=None)  # type: ignore[arg-type]  # both are set at start-up
    services.max_body_bytes = config.queue.max_body_bytes
    services.skip_auth = config.bench_skip_auth
    if config.bench_skip_auth:
        log.warning("TASKYARD_BENCH_SKIP_AUTH is set: every request is allowed everything (benchmarks only)")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with running(config) as deployment:
            services.queue = deployment.queue
            services.auth = deployment.auth
            if started is not None:
                started.set()
            yield

    app = build_app(services, lifespan=lifespan)
    app.state.services = services  # for _Server.shutdown
    return app


class _Server(uvicorn.Server):
    """uvicorn's server, but the first SIGINT or SIGTERM stops the local worker before the API: its
    running tasks are resolved worker-shutdown (so they run again) while the API can still hear it."""

    before_exit: Callable[[], Awaitable[None]] | None = None
    _stopping = False
    _loop: asyncio.AbstractEventLoop

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.before_exit is None or self._stopping:
            super().handle_exit(sig, frame)
            return
        self._stopping = True
        loop = self._loop

        async def stop() -> None:
            try:
                assert self.before_exit is not None
                await self.before_exit()
            finally:
                self.should_exit = True

        loop.call_soon_threadsafe(lambda: loop.create_task(stop()))

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """End live-log streams first: uvicorn waits for every open response before it stops, and
        a follower's would otherwise stay open for as long as its task runs."""
        app = self.config.app
        queue = app.state.services.queue if isinstance(app, Starlette) else None
        if queue is not None:
            queue.live_log_followers.close()
        await super().shutdown(sockets)


async def serve(
    config: ServerConfig,
    *,
    banner: str | None = None,
    worker: WorkerConfig | None = None,
    lock: Lock | None = None,
) -> None:
    """Serve the API until interrupted; with `worker`, run that worker as a child process, which
    shares `lock` (the data directory's) so that it stays held until the worker is gone too."""
    app = application(config)
    server = _Server(
        uvicorn.Config(
            app, host=config.host, port=config.port, log_level="warning", access_log=False, lifespan="on"
        )
    )
    server._loop = asyncio.get_running_loop()

    async def start() -> None:
        while not server.started:  # print only once the port is really ours
            await asyncio.sleep(0.05)
        if banner:
            print(banner, flush=True)
        if worker is not None:
            await _run_local_worker(server, worker, lock)

    starting = asyncio.create_task(start())
    try:
        await server.serve()
    finally:
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await starting


async def _run_local_worker(server: _Server, config: WorkerConfig, lock: Lock | None) -> None:
    """`taskyard worker` as a child process: a core of its own on a multi-core machine, and a task
    that upsets the worker can't take the API down. It is stopped with SIGTERM before the API
    (its tasks resolved worker-shutdown), and dies with this process in any case.

    It holds the data directory's lock too: if this process is killed outright, its worker still
    takes a moment to stop its tasks, and a new `up` must not start on the directory meanwhile."""
    from taskyard.cli.worker import worker_process

    command, env = worker_process(config)
    child = await asyncio.create_subprocess_exec(
        *command,
        env=env,
        start_new_session=True,
        preexec_fn=_die_with_parent,
        pass_fds=() if lock is None else (lock.fileno(),),
    )

    async def stop() -> None:
        with contextlib.suppress(ProcessLookupError):
            child.terminate()
        await child.wait()

    server.before_exit = stop
    try:
        code = await child.wait()
    except asyncio.CancelledError:
        with contextlib.suppress(ProcessLookupError):
            child.kill()
        raise
    if not server.should_exit and not server._stopping:
        log.error("the local worker exited with status %s; the API goes on without it", code)


def _die_with_parent() -> None:
    """In the child: ask Linux for SIGTERM when the parent dies, even by SIGKILL (else nothing)."""
    with contextlib.suppress(Exception):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)

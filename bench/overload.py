"""Overload: does a real `taskyard serve` stay responsive, shed what it can't take, and lose nothing?

For each backend (SQLite in a temporary data directory, PostgreSQL in a scratch database) it starts
the server as lifecycle.py does and runs these scenarios, each for `--duration` seconds, while a
separate client (a process of its own) pings (`GET /api/queue/v1/ping`, one at a time, one
connection) to measure how responsive the server stays:

1. idle      `--idle` connections (1,000) opened and never sent a byte (slowloris): how many
             the server closed, and when.
2. longpoll  `--long-polls` clients (2,000), each looping claimWork(tasks=1) on empty task queues.
3. create    `--creators` clients (200), each looping createTask. A createTask refused with 429 or
             503 waits its Retry-After and is sent again with the same taskId and body.
4. all       the three at once.
5. slowbody  `--slow-bodies` clients (300, beyond the default --max-in-flight) each sending a
             createTask head, then its body a byte a second, and 2 s later the creators of 3.: how
             the slow ones were answered (408 once --body-timeout passed) and when, and whether
             the creators got through (they should: a request is counted in flight only once its
             body has arrived). The clients are on loopback, which --max-connections-per-client
             does not cap. Not in `all`; run it with --duration above --body-timeout.

It prints, per scenario: ping p50/p99/max and failures, the status codes each kind of call got, and
at the end whether every task a createTask answered 200 for exists (task status answers 200).
Figures are printed, never asserted; the machine is shared, so they are noisy. See bench/README.md.
Run: .venv/bin/python bench/overload.py [--backends sqlite,postgres] [--serve-args '...']
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import secrets
import shlex
import shutil
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from lifecycle import (
    ROOT_CLIENT_ID,
    Api,
    Creds,
    Profiler,
    RawSession,
    Server,
    kill_leftovers,
    ms,
    now,
    percentile,
    scratch_database,
    slugid,
    task_definition,
    taskyard_command,
)

SCENARIOS = ("idle", "longpoll", "create", "all", "slowbody")
SLOW_BODY_BYTES = 2000  # what each slow body declares; one byte of it is sent per second
SLOW_BODY_HEAD_START = 2.0  # seconds the slow bodies have before the creators start
PING_EVERY = 0.05  # seconds between the pinger's requests
PING_PATIENCE = 10.0  # a ping not answered within this is counted failed
RETRY_WAIT = 1.0  # after a 429/503 (the server says Retry-After: 1; the raw client drops headers)


@dataclass
class Tally:
    """What one scenario saw."""

    pings: list[float] = field(default_factory=list)
    ping_failures: int = 0
    statuses: dict[str, Counter[str]] = field(default_factory=dict)
    idle_opened: int = 0
    idle_refused: int = 0
    idle_closed_at: list[float] = field(default_factory=list)
    slow_answered: Counter[str] = field(default_factory=Counter)
    slow_answered_at: list[float] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    missing: int = 0
    server_died: bool = False

    def count(self, kind: str, status: int | str) -> None:
        self.statuses.setdefault(kind, Counter())[str(status)] += 1


async def ping_for(root_url: str, seconds: float) -> None:
    """The pinger's own process (`--ping-for`): ping for `seconds`, printing each ping's latency in
    seconds, or `failed`. A process of its own, so that its pings wait for the server alone, not
    behind the load generator's thousands of connections in the same event loop."""
    session = RawSession(Api(root_url, "raw"))
    url = root_url + "/api/queue/v1/ping"
    give_up = now() + seconds
    while now() < give_up:
        sent = now()
        try:
            status, _ = await asyncio.wait_for(session.send("GET", url, b"", {}), PING_PATIENCE)
        except (TimeoutError, OSError, asyncio.IncompleteReadError):
            status = 0
        print(f"{now() - sent:.6f}" if status == 200 else "failed", flush=True)
        await asyncio.sleep(PING_EVERY)
    await session.close()


async def pinger(api: Api, tally: Tally, seconds: float) -> None:
    """Run `ping_for` in a process of its own and count what it printed."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--ping-for", str(seconds), api.root_url, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await child.communicate()
    for line in out.decode().split():
        if line == "failed":
            tally.ping_failures += 1
        else:
            tally.pings.append(float(line))


async def idle_connection(api: Api, tally: Tally, opened_at: float) -> None:
    """Open a connection and never send: wait until the server closes it (or the scenario ends)."""
    host, port = api.root_url.split("://", 1)[1].rsplit(":", 1)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 10)
    except (TimeoutError, OSError):
        tally.idle_refused += 1
        return
    tally.idle_opened += 1
    try:
        with contextlib.suppress(OSError):
            await reader.read(1)  # b"" once the server closes it
        tally.idle_closed_at.append(now() - opened_at)
    finally:
        writer.close()


async def slow_body(api: Api, tally: Tally, opened_at: float) -> None:
    """Send a createTask head, then its body a byte a second: count how the server answers, and when."""
    host, port = api.root_url.split("://", 1)[1].rsplit(":", 1)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 10)
    except (TimeoutError, OSError):
        tally.slow_answered["refused"] += 1
        return
    head = (
        f"PUT /api/queue/v1/task/{slugid()} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {SLOW_BODY_BYTES}\r\n\r\n"
    )
    answer = asyncio.ensure_future(reader.readline())
    try:
        writer.write(head.encode())
        for _ in range(SLOW_BODY_BYTES):
            done, _ = await asyncio.wait({answer}, timeout=1.0)
            if done:
                break
            writer.write(b" ")
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            line = await answer
            status = line.split()[1].decode() if line.startswith(b"HTTP/") else "closed"
            tally.slow_answered[status] += 1
            tally.slow_answered_at.append(now() - opened_at)
    except OSError:
        tally.slow_answered["closed"] += 1
        tally.slow_answered_at.append(now() - opened_at)
    finally:
        answer.cancel()
        writer.close()


async def long_poller(api: Api, root: Creds, tally: Tally, i: int, stop: asyncio.Event) -> None:
    session = api.session()
    queue = f"bench/overload-empty-{i % 50}"
    body = {"tasks": 1, "workerGroup": "overload", "workerId": f"w{i}"}
    while not stop.is_set():
        started = now()
        try:
            status, reply = await session.call("POST", f"/claim-work/{queue}", body, root)
        except asyncio.CancelledError:
            tally.count("claimWork", "waiting at the end")
            raise
        except (OSError, asyncio.IncompleteReadError, ValueError):
            tally.count("claimWork", "conn-error")
            await asyncio.sleep(1)
            continue
        quick_empty = status == 200 and not (reply or {}).get("tasks") and now() - started < 1.0
        tally.count("claimWork", "200-at-once" if quick_empty else status)
        if status != 200 or quick_empty:
            await asyncio.sleep(RETRY_WAIT)  # as taskyard's worker does after an empty answer


async def creator(
    api: Api, root: Creds, tally: Tally, definition: dict[str, Any], stop: asyncio.Event, delay: float = 0.0
) -> None:
    await asyncio.sleep(delay)
    session = api.session()
    while not stop.is_set():
        task_id = slugid()
        for _attempt in range(5):  # the same taskId and body again after a 429 or 503: idempotent
            try:
                status, _ = await session.call("PUT", f"/task/{task_id}", definition, root)
            except (OSError, asyncio.IncompleteReadError, ValueError):
                tally.count("createTask", "conn-error")
                await asyncio.sleep(1)
                continue
            tally.count("createTask", status)
            if status == 200:
                tally.created.append(task_id)
            if status not in (429, 503):
                break
            await asyncio.sleep(RETRY_WAIT)


async def verify(api: Api, root: Creds, tally: Tally) -> None:
    """Every task answered 200 exists: its status answers 200 (checked once the load is gone)."""
    ids = iter(list(tally.created))

    async def checker() -> None:
        session = api.session()
        for task_id in ids:
            status = 503
            while status in (429, 503):  # shed: the server is still busy with the load's leftovers
                status, _ = await session.call("GET", f"/task/{task_id}/status", None, root)
                if status in (429, 503):
                    await asyncio.sleep(RETRY_WAIT)
            tally.count("task status", status)
            if status != 200:
                tally.missing += 1

    await asyncio.gather(*(checker() for _ in range(10)))


async def run_scenario(name: str, server: Server, token: str, args: argparse.Namespace) -> Tally:
    root = Creds.permanent(ROOT_CLIENT_ID, token)
    api = Api(server.root_url, "raw")
    tally, stop = Tally(), asyncio.Event()
    definition = task_definition(f"bench/overload-create-{secrets.token_hex(3)}", slugid())
    load: list[asyncio.Task[None]] = []
    started = now()
    if name in ("idle", "all"):
        load += [asyncio.create_task(idle_connection(api, tally, started)) for _ in range(args.idle)]
    if name in ("longpoll", "all"):
        load += [asyncio.create_task(long_poller(api, root, tally, i, stop)) for i in range(args.long_polls)]
    if name == "slowbody":
        load += [asyncio.create_task(slow_body(api, tally, started)) for _ in range(args.slow_bodies)]
    if name in ("create", "all", "slowbody"):
        # After the slow bodies have taken their places in flight: do the creators get any?
        delay = SLOW_BODY_HEAD_START if name == "slowbody" else 0.0
        load += [
            asyncio.create_task(creator(api, root, tally, definition, stop, delay))
            for _ in range(args.creators)
        ]
    await pinger(api, tally, args.duration)
    stop.set()
    for task in load:  # long polls and idle connections hang up; creators finish their call
        if not task.done():
            task.cancel()
    await asyncio.gather(*load, return_exceptions=True)
    await api.close()
    tally.server_died = server.proc is not None and server.proc.poll() is not None
    if not tally.server_died:
        await verify(api, root, tally)
        await api.close()
    return tally


def print_tally(backend: str, name: str, tally: Tally, args: argparse.Namespace) -> None:
    p50 = ms(percentile(tally.pings, 50)) if tally.pings else float("nan")
    p99 = ms(percentile(tally.pings, 99)) if tally.pings else float("nan")
    top = ms(max(tally.pings)) if tally.pings else float("nan")
    print(f"\n  {backend} / {name} ({args.duration:.0f} s)")
    print(f"    ping             n={len(tally.pings)} p50={p50:.1f} ms p99={p99:.1f} ms max={top:.0f} ms")
    print(f"                     failed (>{PING_PATIENCE:.0f} s or refused): {tally.ping_failures}")
    if name in ("idle", "all"):
        closed = tally.idle_closed_at
        when = f", first at {min(closed):.1f} s, last at {max(closed):.1f} s" if closed else ""
        print(
            f"    idle connections opened {tally.idle_opened}, refused {tally.idle_refused},"
            f" closed by the server {len(closed)}{when}"
        )
    if name == "slowbody":
        at = tally.slow_answered_at
        when = f", first at {min(at):.1f} s, last at {max(at):.1f} s" if at else ""
        shown = ", ".join(f"{status}: {n}" for status, n in sorted(tally.slow_answered.items()))
        print(f"    slow bodies      {shown or 'none answered'}{when}")
    for kind, counts in sorted(tally.statuses.items()):
        shown = ", ".join(f"{status}: {n}" for status, n in sorted(counts.items()))
        print(f"    {kind:<16} {shown}")
    if tally.server_died:
        print("    THE SERVER DIED")
    elif tally.created:
        print(f"    answered 200     {len(tally.created)} tasks, missing afterwards: {tally.missing}")


async def run_backend(name: str, args: argparse.Namespace) -> None:
    print(f"\n== {name} ==")
    data_dir = Path(tempfile.mkdtemp(prefix=f"taskyard-overload-{name}-"))
    try:
        async with scratch_database(name) as db_url:
            if name == "postgres" and db_url is None:
                return
            token = secrets.token_urlsafe(33)
            command = shlex.split(args.taskyard) if args.taskyard else taskyard_command()
            server = Server(data_dir, db_url, token, command, serve_args=shlex.split(args.serve_args))
            try:
                await server.start()
                print(f"  taskyard serve pid {server.pid} on {server.root_url} ({db_url or 'SQLite'})")
                for scenario in args.scenarios:
                    profiler = Profiler(args.profile, server.pid, f"{name}-{scenario}")
                    try:
                        tally = await run_scenario(scenario, server, token, args)
                    finally:
                        profiler.stop()
                    print_tally(name, scenario, tally, args)
                    if tally.server_died:
                        print(server.log_tail())
                        return
                    await asyncio.sleep(2)  # let the server settle between scenarios
            finally:
                server.stop()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backends", default="sqlite,postgres", help="comma-separated: sqlite,postgres")
    p.add_argument(
        "--scenarios", default=",".join(SCENARIOS[:4]), help="comma-separated: " + ",".join(SCENARIOS)
    )
    p.add_argument("--duration", type=float, default=15.0, help="seconds each scenario lasts")
    p.add_argument("--idle", type=int, default=1000, help="connections that never send")
    p.add_argument("--long-polls", type=int, default=2000, help="concurrent claimWork long polls")
    p.add_argument("--creators", type=int, default=200, help="concurrent createTask callers")
    p.add_argument("--slow-bodies", type=int, default=300, help="clients sending a body a byte a second")
    p.add_argument("--serve-args", default="", help="more arguments for `taskyard serve`")
    p.add_argument("--taskyard", default="", help="command that runs taskyard (default: this venv's)")
    p.add_argument("--profile", type=Path, default=None, help="record the server with py-spy into this dir")
    args = p.parse_args(argv)
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    unknown = set(args.scenarios) - set(SCENARIOS)
    if unknown:
        p.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--ping-for"]:  # the pinger's own process: `--ping-for SECONDS ROOT_URL`
        asyncio.run(ping_for(argv[2], float(argv[1])))
        return 0
    args = parse_args(argv)
    raise_fd_limit()  # this process holds every connection of the load: thousands
    try:
        for backend in args.backends.split(","):
            asyncio.run(run_backend(backend, args))
    finally:
        kill_leftovers()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`taskyard events tail [--exchange NAME]... [PATTERN]`: follow a deployment's events live.

From the server's HTTP event stream (`GET /api/events/v1/stream`, event_stream.py) at
TASKCLUSTER_ROOT_URL, signed with the TASKCLUSTER_* credentials (or their flags), like the other
commands; it reconnects by itself, from the last event it saw. From RabbitMQ instead when
`--events amqp://...` (or TASKYARD_EVENTS) names the deployment's broker: a queue of the command's
own, exclusive and auto-deleted. Either way each exchange is bound with PATTERN (AMQP topic rules;
`#` by default). Each event is one line, `TIME EXCHANGE ROUTING-KEY STATE`, or with `--json` one
JSON object per line.

Exit status: 130 on Ctrl-C and 141 when the reader of its output goes away (`| head`), as a shell
reports a process those signals ended, without a word; 1 when the server or broker cannot be
reached, refuses (bad bindings, missing scopes), or is lost for good; 2 for bad usage (a malformed
URL or pattern, an unknown exchange, missing credentials).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from taskyard.cli import admin, event_stream, http, options
from taskyard.events.port import BadPattern, BusUnavailable, Envelope, check_pattern
from taskyard.events.profiles import PROFILES, SEED_PREFIX, TC_PREFIX, Profiles
from taskyard.model import dates
from taskyard.model.client_errors import Refused, Unreachable
from taskyard.model.errors import ConfigError

EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_CLOSED_PIPE = 141  # 128 + SIGPIPE


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `events` and its action `tail` on `taskyard`'s sub-commands."""
    events = commands.add_parser("events", help="follow a deployment's events live")
    actions = events.add_subparsers(dest="action", required=True, metavar="ACTION")
    tail = actions.add_parser(
        "tail",
        help="print events as they happen, one line each",
        description="Print the deployment's events as they are published, one line each: time, "
        "exchange, routing key and state. Reads them from the server's event stream at "
        "TASKCLUSTER_ROOT_URL, or from RabbitMQ with --events amqp://.... PATTERN "
        "follows AMQP's topic rules: words separated by dots, * for one word, # for any number "
        "(default #). Ctrl-C stops it (exit 130).",
    )
    tail.add_argument("pattern", metavar="PATTERN", nargs="?", default="#", help="the binding pattern")
    tail.add_argument(
        "--exchange",
        action="append",
        metavar="NAME",
        help="an exchange to follow, repeatable: a short name (task-pending) for TaskCluster's, or a "
        "full one (exchange/taskcluster-queue/v1/task-pending, v1/queue:task-pending); "
        "default: every one of TaskCluster's",
    )
    tail.add_argument("--json", action="store_true", help="one JSON object per event instead of text")
    options.add_declared(tail, "events tail")
    admin.add_connection_options(tail)


def exchanges(names: Sequence[str] | None) -> list[str]:
    """Full exchange names for `--exchange` values; ConfigError naming the known ones."""
    known = Profiles(PROFILES).exchanges()
    if not names:
        return [e for e in known if e.startswith(TC_PREFIX)]
    chosen = []
    for name in names:
        full = name if name in known else TC_PREFIX + name
        if full not in known:
            short = ", ".join(e.removeprefix(TC_PREFIX) for e in known if e.startswith(TC_PREFIX))
            seed = ", ".join(e for e in known if e.startswith(SEED_PREFIX))
            raise ConfigError("--exchange", name, f"must be one of {short} (TaskCluster's), or {seed}")
        chosen.append(full)
    return list(dict.fromkeys(chosen))


def main(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """Run `events tail`; answer the exit status."""
    try:
        url = options.resolve(args, environ)["events"]
        bindings = [(exchange, check_pattern(args.pattern)) for exchange in exchanges(args.exchange)]
        if url in ("", "memory://"):
            connection = admin.connection(args, environ)
        else:
            from taskyard.events.amqp import check_url

            check_url(url, "--events")
    except (ConfigError, BadPattern) as exc:
        print(f"taskyard: {exc.message}", file=sys.stderr)
        return 2
    try:
        if url in ("", "memory://"):
            tail_http(connection, bindings, as_json=args.json, out=sys.stdout)
        else:
            asyncio.run(tail(url, bindings, as_json=args.json, out=sys.stdout))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # Whoever read our output has gone: stop quietly, and keep Python's own flush at exit quiet.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_CLOSED_PIPE
    except (BusUnavailable, Unreachable) as exc:
        print(f"taskyard: {exc}", file=sys.stderr)
        return 1
    except Refused as exc:
        print(f"taskyard: {exc.message}", file=sys.stderr)
        return 1
    return 0


def tail_http(
    connection: http.Connection, bindings: list[tuple[str, str]], *, as_json: bool, out: TextIO
) -> None:
    """Print each event of the server's stream as it arrives, until interrupted."""

    def connected() -> None:
        # On stderr, where a pipe does not look: from now on, nothing published is missed.
        names = " ".join(e.removeprefix(TC_PREFIX) for e, _ in bindings)
        print(f"following {names} ({bindings[0][1]}) on {connection.root_url}", file=sys.stderr, flush=True)

    for envelope in event_stream.follow(connection, bindings, connected=connected):
        out.write(line(envelope, as_json) + "\n")
        out.flush()


async def tail(url: str, bindings: list[tuple[str, str]], *, as_json: bool, out: TextIO) -> None:
    """Print each event as it arrives until cancelled (or the output or the broker goes away)."""
    from taskyard.events.amqp import following, redact

    async with following(url, bindings) as events:
        # On stderr, where a pipe does not look: from now on, nothing published is missed.
        names = " ".join(e.removeprefix(TC_PREFIX) for e, _ in bindings)
        print(f"following {names} ({bindings[0][1]}) on {redact(url)}", file=sys.stderr, flush=True)
        async for envelope in events:
            out.write(line(envelope, as_json) + "\n")
            out.flush()


def line(envelope: Envelope, as_json: bool) -> str:
    """One event as the command prints it."""
    now = dates.to_iso(dates.now_ms())
    if as_json:
        record = {
            "time": now,
            "exchange": envelope.exchange,
            "routingKey": envelope.routing_key,
            "cc": envelope.cc,
            "body": envelope.body,
        }
        return json.dumps(record, separators=(",", ":"))
    exchange = envelope.exchange.removeprefix(TC_PREFIX)
    return f"{now} {exchange} {envelope.routing_key} {state(envelope.body)}"


def state(body: Mapping[str, Any]) -> str:
    """The state the event tells of: its run's (with the reason of an exception), else the task's."""
    status = body.get("status")
    if not isinstance(status, dict):
        return "-"
    run_id = body.get("runId", body.get("run_id"))
    runs = status.get("runs")
    if isinstance(run_id, int) and isinstance(runs, list) and 0 <= run_id < len(runs):
        run = runs[run_id]
        if isinstance(run, dict) and "state" in run:
            reason = run.get("reasonResolved")
            return f"{run['state']}/{reason}" if run["state"] == "exception" and reason else str(run["state"])
    return str(status.get("state", "-"))

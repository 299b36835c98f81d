"""`taskyard api SERVICE METHOD [ARGS] [--input FILE]`: any API call by its TaskCluster name.

The methods are the server's own, read from this taskyard's route tables, so every route the
server has is callable and none that it lacks. ARGS fill the path's parameters in order;
`--query KEY=VALUE` adds query parameters; `--input FILE` (`-` for standard input) is the JSON
body. The call is signed with the current credentials and its JSON answer printed. Without
METHOD, the service's methods are listed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from taskyard.cli import http, output
from taskyard.cli.tasks import Result

_PARAMETER = re.compile(r"{(\w+)(?::\w+)?}")
# The services, by the name in `/api/<service>/v1/` (tests/cli/test_lists.py holds this to the
# server's tables); named here so that `--help` needs none of the server's modules.
SERVICES = ("auth", "events", "hooks", "index", "notify", "queue", "scheduler", "secrets", "worker-manager")
# Methods that stream rather than answer JSON: the command that follows each.
STREAMS = {("events", "stream"): "taskyard events tail"}


def add_command(commands: Any, connection: argparse.ArgumentParser) -> None:
    api = commands.add_parser(
        "api",
        parents=[connection, output.options()],
        help="call any API method by its TaskCluster name",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    api.add_argument(
        "service", metavar="SERVICE", help=f"the service's name in its URL: {', '.join(SERVICES)}"
    )
    api.add_argument("method", metavar="METHOD", nargs="?", help="like createTask (omit it to list them)")
    api.add_argument("args", metavar="ARG", nargs="*", help="the path's parameters, in order")
    api.add_argument("--input", metavar="FILE", help="the request body, JSON (- for standard input)")
    api.add_argument(
        "--query", action="append", default=[], metavar="KEY=VALUE", help="a query parameter (repeat)"
    )
    api.set_defaults(handler=call)


def tables() -> dict[str, list[Any]]:
    # The server's modules, only when `api` runs.
    from taskyard.api import events_v1
    from taskyard.api.tables import service_tables

    return {**service_tables(), "events": events_v1.ROUTES}


def parameters(path: str) -> list[str]:
    return _PARAMETER.findall(path)


def call(connection: http.Connection, args: argparse.Namespace) -> Result:
    known = tables()
    if args.service not in known:
        raise http.Failed(f"no service {args.service!r}: there are {', '.join(sorted(known))}")
    routes = {r.name: r for r in known[args.service]}
    if args.method is None:
        rows = [
            f"{r.name} {' '.join(f'<{p}>' for p in parameters(r.path))}".rstrip()
            + (
                f"  (a stream: follow it with `{STREAMS[args.service, r.name]}`)"
                if (args.service, r.name) in STREAMS
                else ""
            )
            for r in routes.values()
        ]
        return Result([r.name for r in routes.values()], "\n".join(rows))
    route = routes.get(args.method)
    if route is None:
        raise http.Failed(
            f"{args.service} has no method {args.method}: `taskyard api {args.service}` lists them"
        )
    follow = STREAMS.get((args.service, args.method))
    if follow is not None:
        raise http.Failed(f"{args.method} is a stream, not a JSON answer: follow it with `{follow}`")
    names = parameters(route.path)
    if len(args.args) != len(names):
        wanted = " ".join(f"<{n}>" for n in names) or "no arguments"
        raise http.Failed(f"{args.method} takes {wanted}; {len(args.args)} given")
    values = dict(zip(names, args.args, strict=True))
    path = _PARAMETER.sub(lambda m: http.segment(values[m.group(1)]), route.path)
    body = _body(args.input, route)
    query = dict(_pair(q) for q in args.query)
    answer = http.call(connection, route.method, path, service=args.service, body=body, query=query or None)
    return Result(answer, json.dumps(answer, indent=2) if answer is not None else "")


def _body(source: str | None, route: Any) -> Any:
    if source is None:
        if route.input is not None:
            raise http.Failed(
                f"{route.name} takes a JSON body: give it with --input FILE (- for standard input)"
            )
        return {} if route.method in ("POST", "PUT") else None
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
        return json.loads(text)
    except OSError as exc:
        raise http.Failed(f"--input {source}: cannot be read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise http.Failed(f"--input {source}: line {exc.lineno}: not valid JSON: {exc.msg}") from None


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise http.Failed(f"--query {text!r}: must be KEY=VALUE")
    return key, value

"""`taskyard secret get|set|list|remove`: the secrets service from the command line.

Like `taskyard task`, the commands talk HTTP to the deployment at TASKCLUSTER_ROOT_URL with the
TASKCLUSTER_* credentials. A value is read from standard input or `--file`, never from the command
line, where other users' `ps` and the shell's history would see it. Exit status: 0 done, 1 the
server refused or could not be reached, 2 bad usage or an unusable value.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from taskyard.cli import admin, http
from taskyard.cli.tasks import BadFile, Result
from taskyard.model import dates

COMMANDS = ("secret",)
PAGE_SIZE = 1000  # names per list request (the server's maximum)


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `secret get|set|list|remove` on `taskyard`'s sub-commands."""
    common = admin._common_options()
    secret = commands.add_parser("secret", help="read and write the secrets service's secrets")
    actions = secret.add_subparsers(dest="action", required=True, metavar="ACTION")
    get = actions.add_parser(
        "get",
        parents=[common],
        help="print a secret's value (JSON); -o json adds its expiry",
        description="Print the value of secret NAME as JSON (needs secrets:get:NAME). An expired "
        "secret is not found, as in TaskCluster.",
    )
    get.add_argument("name", metavar="NAME")
    get.set_defaults(handler=get_secret)
    put = actions.add_parser(
        "set",
        parents=[common],
        help="create or replace a secret; its value (a JSON object) from standard input or --file",
        description="Create or replace secret NAME (needs secrets:set:NAME). Its value, a JSON "
        "object, is read from standard input, or from --file: never from the command line.",
    )
    put.add_argument("name", metavar="NAME")
    put.add_argument("--file", metavar="FILE", default="-", help="read the value from FILE (default: stdin)")
    expiry = put.add_mutually_exclusive_group()
    expiry.add_argument(
        "--expires", type=admin.iso_date, metavar="DATE", help="when it expires, like 2027-01-01T00:00:00Z"
    )
    expiry.add_argument(
        "--expires-in",
        type=admin.duration,
        metavar="DURATION",
        help=f"how long it lasts, like 30d or '1 year' (default {admin.DEFAULT_EXPIRES_IN})",
    )
    put.set_defaults(handler=set_secret)
    listing = actions.add_parser(
        "list", parents=[common], help="list the names of unexpired secrets (needs secrets:list-secrets)"
    )
    listing.set_defaults(handler=list_secrets)
    remove = actions.add_parser("remove", parents=[common], help="delete a secret (needs secrets:set:NAME)")
    remove.add_argument("name", metavar="NAME")
    remove.set_defaults(handler=remove_secret)


def _path(name: str) -> str:
    return f"/secret/{http.segment(name)}"


def read_value(path: str) -> dict[str, Any]:
    """The JSON object in `path` (`-`: standard input); BadFile, which never quotes it, if unusable."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadFile(
            path, f"cannot be read: {getattr(exc, 'strerror', None) or type(exc).__name__}"
        ) from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadFile(path, f"line {exc.lineno}, column {exc.colno}: not valid JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise BadFile(path, "must hold a JSON object: the secret's value")
    return value


def get_secret(connection: http.Connection, args: argparse.Namespace) -> Result:
    answer = http.call(connection, "GET", _path(args.name), service="secrets")
    return Result(answer, json.dumps(answer["secret"], indent=2, sort_keys=True))


def set_secret(connection: http.Connection, args: argparse.Namespace) -> Result:
    value = read_value(args.file)
    expires = args.expires
    if expires is None:
        expires = dates.now_ms() + (args.expires_in or admin.duration(admin.DEFAULT_EXPIRES_IN))
    body = {"secret": value, "expires": dates.to_iso(expires)}
    http.call(connection, "PUT", _path(args.name), service="secrets", body=body)
    return Result(None, f"Set secret {args.name}, expiring {dates.to_iso(expires)}.")


def list_secrets(connection: http.Connection, args: argparse.Namespace) -> Result:
    """Every page of the list: the names, one a line."""
    names: list[str] = []
    query = {"limit": str(PAGE_SIZE)}
    while True:
        page = http.call(connection, "GET", "/secrets", service="secrets", query=query)
        names += page["secrets"]
        if not page.get("continuationToken"):
            break
        query = {**query, "continuationToken": page["continuationToken"]}
    return Result(names, "\n".join(names) if names else "no secrets")


def remove_secret(connection: http.Connection, args: argparse.Namespace) -> Result:
    http.call(connection, "DELETE", _path(args.name), service="secrets")
    return Result(None, f"Removed secret {args.name}.")

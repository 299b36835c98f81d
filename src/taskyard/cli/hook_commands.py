"""`taskyard hook list|show|create|update|remove|trigger|fires`: the hooks service from the
command line.

Like `taskyard secret`, the commands talk HTTP to the deployment at TASKCLUSTER_ROOT_URL with the
TASKCLUSTER_* credentials. A definition (and a trigger's payload) is a file of YAML (.yaml/.yml)
or JSON, or standard input (`-`). Exit status: 0 done, 1 the server refused or could not be
reached, 2 bad usage or an unusable file.
"""

from __future__ import annotations

import argparse
import json

from taskyard.cli import admin, http
from taskyard.cli.tasks import Result, read_definition

COMMANDS = ("hook",)
PAGE_SIZE = 1000


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `hook ...` on `taskyard`'s sub-commands."""
    common = admin._common_options()
    hook = commands.add_parser("hook", help="define, trigger and inspect the hooks service's hooks")
    actions = hook.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list",
        parents=[common],
        help="list the hook groups, or the hooks of GROUP (needs hooks:list-hooks:...)",
    )
    listing.add_argument("group", metavar="GROUP", nargs="?")
    listing.set_defaults(handler=list_hooks)
    for name, handler, text in (
        ("show", show_hook, "print a hook's definition (needs hooks:get:GROUP:HOOK)"),
        ("remove", remove_hook, "delete a hook and its last fires (needs hooks:modify-hook:GROUP/HOOK)"),
        (
            "fires",
            list_fires,
            "list a hook's last fires, newest first (needs hooks:list-last-fires:GROUP/HOOK)",
        ),
    ):
        action = actions.add_parser(name, parents=[common], help=text)
        _ids(action)
        action.set_defaults(handler=handler)
    for name, handler, text in (
        ("create", create_hook, "create a hook from FILE (YAML or JSON; - for stdin)"),
        ("update", update_hook, "replace a hook's definition with FILE's (YAML or JSON; - for stdin)"),
    ):
        action = actions.add_parser(
            name,
            parents=[common],
            help=text,
            description=text + ". Needs hooks:modify-hook:GROUP/HOOK and assume:hook-id:GROUP/HOOK.",
        )
        _ids(action)
        action.add_argument("file", metavar="FILE")
        action.set_defaults(handler=handler)
    trigger = actions.add_parser(
        "trigger", parents=[common], help="fire a hook now (needs hooks:trigger-hook:GROUP/HOOK)"
    )
    _ids(trigger)
    trigger.add_argument("--payload", metavar="FILE", help="the payload, YAML or JSON (default: {})")
    trigger.set_defaults(handler=trigger_hook)


def _ids(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("group", metavar="GROUP")
    parser.add_argument("hook", metavar="HOOK")


def _path(args: argparse.Namespace, tail: str = "") -> str:
    return f"/hooks/{http.segment(args.group)}/{http.segment(args.hook)}{tail}"


def list_hooks(connection: http.Connection, args: argparse.Namespace) -> Result:
    if args.group is None:
        groups = http.call(connection, "GET", "/hooks", service="hooks")["groups"]
        return Result(groups, "\n".join(groups) if groups else "no hooks")
    hooks = http.call(connection, "GET", f"/hooks/{http.segment(args.group)}", service="hooks")["hooks"]
    lines = [
        f"{h['hookGroupId']}/{h['hookId']}  {' | '.join(h['schedule']) or '-'}  {h['metadata']['name']}"
        for h in hooks
    ]
    return Result(hooks, "\n".join(lines))


def show_hook(connection: http.Connection, args: argparse.Namespace) -> Result:
    answer = http.call(connection, "GET", _path(args), service="hooks")
    return Result(answer, json.dumps(answer, indent=2))


def create_hook(connection: http.Connection, args: argparse.Namespace) -> Result:
    body = read_definition(args.file)
    answer = http.call(connection, "PUT", _path(args), service="hooks", body=body)
    return Result(answer, f"Created hook {args.group}/{args.hook}.")


def update_hook(connection: http.Connection, args: argparse.Namespace) -> Result:
    body = read_definition(args.file)
    answer = http.call(connection, "POST", _path(args), service="hooks", body=body)
    return Result(answer, f"Updated hook {args.group}/{args.hook}.")


def remove_hook(connection: http.Connection, args: argparse.Namespace) -> Result:
    http.call(connection, "DELETE", _path(args), service="hooks")
    return Result(None, f"Removed hook {args.group}/{args.hook}.")


def trigger_hook(connection: http.Connection, args: argparse.Namespace) -> Result:
    payload = read_definition(args.payload) if args.payload else {}
    answer = http.call(connection, "POST", _path(args, "/trigger"), service="hooks", body=payload)
    if not answer:
        return Result(answer, f"Hook {args.group}/{args.hook} declined: its template rendered to nothing.")
    return Result(answer, f"Fired hook {args.group}/{args.hook}: task {answer['taskId']}")


def list_fires(connection: http.Connection, args: argparse.Namespace) -> Result:
    fires: list[dict[str, str]] = []
    query = {"limit": str(PAGE_SIZE)}
    while True:
        page = http.call(connection, "GET", _path(args, "/last-fires"), service="hooks", query=query)
        fires += page["lastFires"]
        if not page.get("continuationToken"):
            break
        query = {**query, "continuationToken": page["continuationToken"]}
    lines = [
        f"{f['taskCreateTime']}  {f['firedBy']:<20}  {f['taskId']}  {f['result']}  {f['taskState']}"
        + (f"  {f['error'][:200]}" if f["error"] else "")
        for f in fires
    ]
    return Result(fires, "\n".join(lines))

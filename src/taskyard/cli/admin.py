"""`taskyard client|role|scopes`: manage a running deployment's clients and roles through its auth API.

The commands talk HTTP to the deployment at TASKCLUSTER_ROOT_URL, signing with TASKCLUSTER_CLIENT_ID,
TASKCLUSTER_ACCESS_TOKEN and, for temporary credentials, TASKCLUSTER_CERTIFICATE; each has a flag, and
the flag wins. Output is text for people, or `--json` for scripts. Exit status: 0 done, 1 the server
refused or could not be reached, 2 bad usage or configuration. An access token is printed only by the
commands that exist to show one (`client create`, `client reset`).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO
from urllib.parse import urlsplit

from taskyard.auth import hawk_client
from taskyard.cli import contexts, http, output, refusals, settings
from taskyard.model import dates
from taskyard.model.client_errors import Refused, Unreachable
from taskyard.model.errors import ConfigError

COMMANDS = ("client", "role", "scopes")
DEFAULT_EXPIRES_IN = "1y"
PAGE_SIZE = 1000  # clients per listClients request (the server's maximum)
# (flag, environment variable, help): the connection every command of this module needs, as
# `cli/settings.py` declares it.
CONNECTION = tuple(
    (o.flag, o.variable, o.help)
    for o in settings.of(settings.CLIENTS)
    if o.variable.startswith("TASKCLUSTER_")
)
CONTEXT = next(o for o in settings.of(settings.CLIENTS) if o.flag == "--context")
TOKEN_LABEL = "Access token (shown only this once; it cannot be shown again):"


@dataclass(frozen=True)
class Shown:
    """What a command answers: `data` for `--json` (None prints nothing), `text` for people."""

    data: Any
    text: str
    wide: str = ""  # `-o wide`: the text with more columns ("" for the same text)


Handler = Callable[[http.Connection, argparse.Namespace], Shown]


# ---------------------------------------------------------------------------------------------------
# Command line.


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `client`, `role` and `scopes` with their actions on `taskyard`'s sub-commands."""
    common = _common_options()
    _add_client_commands(commands, common)
    _add_role_commands(commands, common)
    scopes = commands.add_parser("scopes", help="expand scopes through the deployment's roles")
    actions = scopes.add_subparsers(dest="action", required=True, metavar="ACTION")
    expand = actions.add_parser("expand", parents=[common], help="print what the scopes expand to")
    expand.add_argument("scopes", nargs="+", metavar="SCOPE")
    expand.set_defaults(handler=expand_scopes)


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """The four connection flags; each defaults to its TASKCLUSTER_* variable."""
    for flag, variable, help in CONNECTION:
        parser.add_argument(
            flag, dest=_dest(flag), metavar=flag.split("-")[-1].upper(), help=f"{help} [env {variable}]"
        )
    parser.add_argument("--context", metavar="NAME", help=f"{CONTEXT.help} [env {CONTEXT.variable}]")


def connection_options() -> argparse.ArgumentParser:
    """A parent parser: the connection flags and `--verbose`, for every command that calls the API."""
    common = argparse.ArgumentParser(add_help=False)
    add_connection_options(common)
    common.add_argument(
        "--verbose",
        action="store_true",
        help="print the server's refusals in full, as TaskCluster words them",
    )
    return common


def _common_options() -> argparse.ArgumentParser:
    """The connection's options and the output's (`-o FORMAT`, `--json`): for commands that print data."""
    return argparse.ArgumentParser(add_help=False, parents=[connection_options(), output.options()])


def _add_client_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    client = commands.add_parser(
        "client", help="create, update, list, disable and delete clients; reset access tokens"
    )
    actions = client.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser("create", parents=[common], help="create a client and show its token")
    create.add_argument("client_id", metavar="ID")
    create.add_argument("--scope", action="append", default=[], help="a scope to grant (repeat for more)")
    create.add_argument("--description", default="", help="what the client is for")
    expiry = create.add_mutually_exclusive_group()
    expiry.add_argument(
        "--expires", type=iso_date, metavar="DATE", help="when it expires, like 2027-01-01T00:00:00Z"
    )
    expiry.add_argument(
        "--expires-in",
        type=duration,
        metavar="DURATION",
        help=f"how long it lasts, like 30d, 12h or '1 year 2 months' (default {DEFAULT_EXPIRES_IN})",
    )
    create.set_defaults(handler=create_client)
    listing = actions.add_parser("list", parents=[common], help="list clients (never their tokens)")
    listing.add_argument("--prefix", default="", help="only clients whose id starts with this")
    listing.set_defaults(handler=list_clients)
    delete = actions.add_parser("delete", parents=[common], help="delete a client (no error if absent)")
    delete.add_argument("client_id", metavar="ID")
    delete.set_defaults(handler=delete_client)
    reset = actions.add_parser("reset", parents=[common], help="give a client a new access token")
    reset.add_argument("client_id", metavar="ID")
    reset.set_defaults(handler=reset_access_token)
    update = actions.add_parser(
        "update", parents=[common], help="change a client's scopes, description or expiry (the rest is kept)"
    )
    update.add_argument("client_id", metavar="ID")
    _add_scope_edits(update, "client")
    update.add_argument("--description", help="its new description")
    expiry = update.add_mutually_exclusive_group()
    expiry.add_argument("--expires", type=iso_date, metavar="DATE", help="when it expires from now on")
    expiry.add_argument(
        "--expires-in", type=duration, metavar="DURATION", help="how long it lasts from now on"
    )
    update.set_defaults(handler=update_client)
    for action, effect in (
        ("disable", "its credentials are refused until it is enabled"),
        ("enable", "a disabled client's credentials work again"),
    ):
        toggle = actions.add_parser(action, parents=[common], help=f"{action} a client: {effect}")
        toggle.add_argument("client_id", metavar="ID")
        toggle.set_defaults(handler=toggle_client, toggle=action)


def _add_role_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    role = commands.add_parser("role", help="create, update, list and delete roles")
    actions = role.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser("create", parents=[common], help="create a role")
    create.add_argument("role_id", metavar="ID", help="the role; `assume:ID` grants its scopes")
    create.add_argument("--scope", action="append", required=True, help="a scope it grants (repeat)")
    create.add_argument("--description", default="", help="what the role is for")
    create.set_defaults(handler=create_role)
    update = actions.add_parser(
        "update", parents=[common], help="change a role's scopes or description (the rest is kept)"
    )
    update.add_argument("role_id", metavar="ID")
    _add_scope_edits(update, "role")
    update.add_argument("--description", help="its new description")
    update.set_defaults(handler=update_role)
    listing = actions.add_parser("list", parents=[common], help="list roles")
    listing.set_defaults(handler=list_roles)
    delete = actions.add_parser("delete", parents=[common], help="delete a role (no error if absent)")
    delete.add_argument("role_id", metavar="ID")
    delete.set_defaults(handler=delete_role)


def _add_scope_edits(parser: argparse.ArgumentParser, what: str) -> None:
    """`update`'s flags that change the scopes of the client or role `what`."""
    parser.add_argument(
        "--scope", action="append", help=f"the scopes the {what} holds instead of its own (repeat)"
    )
    parser.add_argument("--add-scope", action="append", default=[], metavar="SCOPE", help="one more (repeat)")
    parser.add_argument(
        "--remove-scope",
        action="append",
        default=[],
        metavar="SCOPE",
        help="one it holds, taken away (repeat)",
    )


def _edited_scopes(what: str, current: Sequence[str], args: argparse.Namespace) -> list[str]:
    """The scopes `--scope`, `--add-scope` and `--remove-scope` make of `current`. A scope to remove
    that is not there, as written, stops the command before anything is changed."""
    granted = list(dict.fromkeys(args.scope)) if args.scope is not None else list(current)
    missing = [s for s in dict.fromkeys(args.remove_scope) if s not in granted]
    if missing:
        raise http.Failed(
            f"{what} does not hold {', '.join(missing)} (it holds: {', '.join(granted) or 'nothing'}); "
            "nothing was changed"
        )
    removed = set(args.remove_scope)
    return [s for s in dict.fromkeys([*granted, *args.add_scope]) if s not in removed]


def _changes_something(args: argparse.Namespace, *flags: str) -> None:
    """A usage error (exit 2) unless one of the scope edits or `flags` was given."""
    edits = ("scope", "add_scope", "remove_scope", *flags)
    if all(getattr(args, name) in (None, []) for name in edits):
        given = ", ".join("--" + name.replace("_", "-") for name in edits)
        args._parser.error(f"nothing to change: pass {given}")


def _dest(flag: str) -> str:
    """`--client-id` -> `connection_client_id`: apart from the commands' own `client_id` and `role_id`."""
    return "connection_" + flag[2:].replace("-", "_")


_DURATION = re.compile(
    r"\s*(?:(?P<years>\d+)\s*y(?:ears?|rs?)?)?"
    r"\s*(?:(?P<months>\d+)\s*mo(?:nths?)?)?"
    r"\s*(?:(?P<weeks>\d+)\s*w(?:eeks?|ks?)?)?"
    r"\s*(?:(?P<days>\d+)\s*d(?:ays?)?)?"
    r"\s*(?:(?P<hours>\d+)\s*h(?:ours?|rs?)?)?"
    r"\s*(?:(?P<minutes>\d+)\s*m(?:in(?:utes?)?)?)?"
    r"\s*(?:(?P<seconds>\d+)\s*s(?:ec(?:onds?)?)?)?\s*"
)
_UNIT_MS = {
    "years": 365 * dates.DAY,
    "months": 30 * dates.DAY,
    "weeks": 7 * dates.DAY,
    "days": dates.DAY,
    "hours": dates.HOUR,
    "minutes": dates.MINUTE,
    "seconds": dates.SECOND,
}


def duration(text: str) -> int:
    """Milliseconds in a duration written as TaskCluster's `fromNow` reads it: `30d`, `1 year 2 months`."""
    match = _DURATION.fullmatch(text)
    total = sum(int(n) * _UNIT_MS[unit] for unit, n in match.groupdict().items() if n) if match else 0
    if total <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 30d, 12h or '1 year 2 months'")
    return total


def iso_date(text: str) -> int:
    """Epoch milliseconds of an ISO 8601 date-time with a timezone."""
    try:
        return dates.parse_iso(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a date-time with a timezone, like 2027-01-01T00:00:00Z"
        ) from None


def connection(
    args: argparse.Namespace, environ: Mapping[str, str], *, anonymous: bool = True
) -> http.Connection:
    """The deployment and credentials; ConfigError if unusable.

    The root URL, and the credentials (client id, access token and certificate, together), each
    come from the flags, else the TASKCLUSTER_* variables, else the context (`contexts`); with
    `--context NAME` given, from the flags, else that context (the variables are not read). With no
    credentials anywhere, the calls are anonymous if `anonymous`, else a ConfigError.
    """
    # An explicit --context takes the place of the TASKCLUSTER_* variables: a command pointed at a
    # context runs there, never as whoever the shell's variables name.
    explicit = getattr(args, "context", None)
    variables: Mapping[str, str] = {} if explicit else environ
    values = {}
    for flag, variable, _ in CONNECTION:
        given = getattr(args, _dest(flag))
        values[variable] = given if given is not None else variables.get(variable, "")
    credentials = ("TASKCLUSTER_CLIENT_ID", "TASKCLUSTER_ACCESS_TOKEN", "TASKCLUSTER_CERTIFICATE")
    if not values["TASKCLUSTER_ROOT_URL"] or not any(values[v] for v in credentials[:2]):
        context = contexts.context_values(getattr(args, "context", None), environ)
        given = values["TASKCLUSTER_ROOT_URL"].rstrip("/")
        values["TASKCLUSTER_ROOT_URL"] = given or context.get("TASKCLUSTER_ROOT_URL", "")
        # A context's credentials go only to its own deployment, never to a root URL given apart.
        ours = not given or given == context.get("TASKCLUSTER_ROOT_URL", "").rstrip("/")
        if ours and not any(values[v] for v in credentials[:2]):
            values.update({v: context.get(v, "") for v in credentials})
    required = CONNECTION[:1] if anonymous and not any(values[v] for v in credentials[:2]) else CONNECTION[:3]
    for flag, variable, _ in required:
        if not values[variable]:
            raise ConfigError(variable, "", f"it is required: set it, pass {flag}, or use a context")
    root_url = values["TASKCLUSTER_ROOT_URL"].rstrip("/")
    parts = urlsplit(root_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError("TASKCLUSTER_ROOT_URL", root_url, "must be an http:// or https:// URL")
    certificate = values["TASKCLUSTER_CERTIFICATE"]
    try:
        hawk_client.certificate_ext(certificate)
    except ValueError:
        raise ConfigError("TASKCLUSTER_CERTIFICATE", "...", "must be the certificate's JSON") from None
    return http.Connection(
        root_url,
        values["TASKCLUSTER_CLIENT_ID"],
        values["TASKCLUSTER_ACCESS_TOKEN"],
        certificate,
    )


def main(
    args: argparse.Namespace,
    environ: Mapping[str, str],
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run the client, role, scopes, task or group command `args` names; answer the exit status."""
    out, err = out or sys.stdout, err or sys.stderr
    handler: Handler = args.handler
    try:
        deployment = connection(args, environ)
        shown = handler(deployment, args)
    except ConfigError as exc:
        print(f"taskyard: {exc.message}", file=err)
        return 2
    except Refused as exc:
        verbose = getattr(args, "verbose", False)
        said = refusals.explain(exc, deployment.client_id, verbose=verbose)
        print("\n".join(f"taskyard: {line}" for line in ([said] if verbose else said.splitlines())), file=err)
        return 1
    except (Unreachable, http.Failed) as exc:
        print(f"taskyard: {exc}", file=err)
        return 1
    fmt = getattr(args, "format", "text")
    output.show(shown.data, shown.text, shown.wide, fmt, out, environ)
    return getattr(shown, "status", 0)


# ---------------------------------------------------------------------------------------------------
# Clients.


def create_client(connection: http.Connection, args: argparse.Namespace) -> Shown:
    """createClient: the new client, with its access token (the only time it is shown)."""
    expires = args.expires
    if expires is None:
        expires = dates.now_ms() + (args.expires_in or duration(DEFAULT_EXPIRES_IN))
    body = {
        "description": args.description,
        "expires": dates.to_iso(expires),
        "scopes": list(dict.fromkeys(args.scope)),
    }
    client = http.call(connection, "PUT", f"/clients/{http.segment(args.client_id)}", body=body)
    text = f"Created client {client['clientId']}.\n{client_text(client)}"
    return Shown(client, f"{text}\n\n{token_text(client)}")


def list_clients(connection: http.Connection, args: argparse.Namespace) -> Shown:
    """listClients, every page of it: the clients (never a token) whose ids start with `--prefix`."""
    found: list[dict[str, Any]] = []
    query = {"limit": str(PAGE_SIZE), **({"prefix": args.prefix} if args.prefix else {})}
    while True:
        page = http.call(connection, "GET", "/clients/", query=query)
        found += page["clients"]
        if not page.get("continuationToken"):
            break
        query = {**query, "continuationToken": page["continuationToken"]}
    now = dates.now_ms()
    rows = [[c["clientId"], c["expires"], _status(c, now), _first_line(c["description"])] for c in found]
    text = table(["CLIENT ID", "EXPIRES", "STATUS", "DESCRIPTION"], rows) if rows else "no clients"
    return Shown(found, text)


def delete_client(connection: http.Connection, args: argparse.Namespace) -> Shown:
    """deleteClient; deleting a client that is not there is no error, as in TaskCluster."""
    http.call(connection, "DELETE", f"/clients/{http.segment(args.client_id)}")
    return Shown(None, f"Deleted client {args.client_id}.")


def reset_access_token(connection: http.Connection, args: argparse.Namespace) -> Shown:
    """resetAccessToken: the client with its new token; the old one stops working."""
    client = http.call(connection, "POST", f"/clients/{http.segment(args.client_id)}/reset")
    text = f"Reset the access token of client {client['clientId']}; the old one no longer works."
    return Shown(client, f"{text}\n\n{token_text(client)}")


def update_client(connection: http.Connection, args: argparse.Namespace) -> Shown:
    """getClient, then updateClient with its scopes edited as `role update` edits a role's, and its
    description and expiry replaced or kept (and its deleteOnExpiration kept)."""
    _changes_something(args, "description", "expires", "expires_in")
    path = f"/clients/{http.segment(args.client_id)}"
    client = http.call(connection, "GET", path)
    expires = client["expires"]
    if args.expires is not None or args.expires_in is not None:
        expires = dates.to_iso(args.expires if args.expires is not None else dates.now_ms() + args.expires_in)
    body = {
        "description": client["description"] if args.description is None else args.description,
        "expires": expires,
        "scopes": _edited_scopes(f"client {args.client_id}", client["scopes"], args),
        "deleteOnExpiration": bool(client.get("deleteOnExpiration", False)),
    }
    updated = http.call(connection, "POST", path, body=body)
    return Shown(updated, f"Updated client {updated['clientId']}.\n{client_text(updated)}")


def toggle_client(connection: http.Connection, args: argparse.Namespace) -> Shown:
    """disableClient or enableClient: a disabled client's credentials are refused, its own and
    any temporary credentials made from them."""
    path = f"/clients/{http.segment(args.client_id)}/{args.toggle}"
    client = http.call(connection, "POST", path)
    return Shown(client, f"{args.toggle.capitalize()}d client {client['clientId']}.\n{client_text(client)}")


def client_text(client: Mapping[str, Any]) -> str:
    """A client for people: its fields, without any token."""
    rows: list[tuple[str, str | Sequence[str]]] = [
        ("clientId", client["clientId"]),
        ("description", client["description"].splitlines()),
        ("expires", client["expires"]),
        ("scopes", client["scopes"]),
    ]
    if sorted(client["expandedScopes"]) != sorted(client["scopes"]):
        rows.append(("expanded", client["expandedScopes"]))
    if client.get("disabled"):
        rows.append(("disabled", "yes"))
    return fields(rows)


def token_text(client: Mapping[str, Any]) -> str:
    """The access token under a label that says it will not be shown again."""
    return f"{TOKEN_LABEL}\n  {client['accessToken']}"


def _status(client: Mapping[str, Any], now: int) -> str:
    if client.get("disabled"):
        return "disabled"
    return "expired" if dates.parse_iso(client["expires"]) < now else "active"


# ---------------------------------------------------------------------------------------------------
# Roles and scopes.


def create_role(connection: http.Connection, args: argparse.Namespace) -> Shown:
    """createRole: the role with the scopes it grants through `assume:<roleId>`."""
    body = {"description": args.description, "scopes": list(dict.fromkeys(args.scope))}
    role = http.call(connection, "PUT", f"/roles/{http.segment(args.role_id)}", body=body)
    return Shown(role, f"Created role {role['roleId']}.\n{role_text(role)}")


def update_role(connection: http.Connection, args: argparse.Namespace) -> Shown:
    """getRole, then updateRole with its scopes replaced (`--scope`), added to or taken from, and
    its description replaced or kept."""
    _changes_something(args, "description")
    path = f"/roles/{http.segment(args.role_id)}"
    role = http.call(connection, "GET", path)
    scopes = _edited_scopes(f"role {args.role_id}", role["scopes"], args)
    description = role["description"] if args.description is None else args.description
    updated = http.call(connection, "POST", path, body={"description": description, "scopes": scopes})
    return Shown(updated, f"Updated role {updated['roleId']}.\n{role_text(updated)}")


def list_roles(connection: http.Connection, args: argparse.Namespace) -> Shown:
    """listRoles: every role of the deployment."""
    found = http.call(connection, "GET", "/roles/")
    rows = [[r["roleId"], str(len(r["scopes"])), _first_line(r["description"])] for r in found]
    return Shown(found, table(["ROLE ID", "SCOPES", "DESCRIPTION"], rows) if rows else "no roles")


def delete_role(connection: http.Connection, args: argparse.Namespace) -> Shown:
    """deleteRole; deleting a role that is not there is no error, as in TaskCluster."""
    http.call(connection, "DELETE", f"/roles/{http.segment(args.role_id)}")
    return Shown(None, f"Deleted role {args.role_id}.")


def role_text(role: Mapping[str, Any]) -> str:
    """A role for people: its scopes and what they expand to."""
    return fields(
        [
            ("roleId", role["roleId"]),
            ("description", role["description"].splitlines()),
            ("scopes", role["scopes"]),
            ("expanded", role["expandedScopes"]),
        ]
    )


def expand_scopes(connection: http.Connection, args: argparse.Namespace) -> Shown:
    """expandScopes: the scopes with every role they assume, one per line."""
    body = {"scopes": list(dict.fromkeys(args.scopes))}
    expanded = http.call(connection, "POST", "/scopes/expand", body=body)
    return Shown(expanded, "\n".join(expanded["scopes"]))


# ---------------------------------------------------------------------------------------------------
# Text.


def fields(rows: Sequence[tuple[str, str | Sequence[str]]]) -> str:
    """`  label:  value` lines, aligned; a list value continues on lines of its own."""
    width = max(len(label) for label, _ in rows) + 3
    lines = []
    for label, value in rows:
        values = [value] if isinstance(value, str) else list(value) or ["(none)"]
        lines.append(f"  {label + ':':<{width}}{values[0]}".rstrip())
        lines += [f"  {'':<{width}}{more}" for more in values[1:]]
    return "\n".join(lines)


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell; the last column is not padded."""
    everything = [header, *rows]
    widths = [max(len(row[i]) for row in everything) for i in range(len(header) - 1)]
    padded = [[*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]] for row in everything]
    lines = ["  ".join(row) for row in padded]
    return "\n".join(line.rstrip() for line in lines)


def _first_line(text: str, limit: int = 60) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"

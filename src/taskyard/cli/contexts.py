"""Named contexts in a config file, and `taskyard signin` for temporary credentials.

The file is `$TASKYARD_CONFIG`, else `$XDG_CONFIG_HOME/taskyard/config.yaml`, else
`~/.config/taskyard/config.yaml`; it is written with mode 0600 (it holds access tokens):

    current-context: local
    contexts:
      local: {rootUrl: http://127.0.0.1:8080, clientId: static/taskyard/root, accessToken: ...}

Each connection setting comes from, in this order: its flag (`--root-url` ...), its TASKCLUSTER_*
variable, then the context (TASKYARD_CONTEXT, else the file's current-context); with `--context
NAME` (before or after the command), from its flag, then that context, whatever the variables
say. A context's credentials (client id, access token, certificate) go only with
its own root URL. Without a client id and access token anywhere, calls are made without
credentials: what the API allows anonymously (public artifacts, pings) works.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from taskyard.auth import hawk
from taskyard.cli import http
from taskyard.model import dates
from taskyard.model.errors import ConfigError

COMMANDS = ("config", "signin")
# Context keys, by the TASKCLUSTER_* variable each stands for.
KEYS = {
    "TASKCLUSTER_ROOT_URL": "rootUrl",
    "TASKCLUSTER_CLIENT_ID": "clientId",
    "TASKCLUSTER_ACCESS_TOKEN": "accessToken",
    "TASKCLUSTER_CERTIFICATE": "certificate",
}


def path(environ: Mapping[str, str]) -> Path:
    if environ.get("TASKYARD_CONFIG"):
        return Path(environ["TASKYARD_CONFIG"])
    base = environ.get("XDG_CONFIG_HOME") or str(Path(environ.get("HOME", "~")).expanduser() / ".config")
    return Path(base) / "taskyard" / "config.yaml"


def load(environ: Mapping[str, str]) -> dict[str, Any]:
    """The config file's content; {} when there is none. ConfigError when it is not usable."""
    from taskyard.model import definition_yaml  # imported when used: most commands never read it

    file = path(environ)
    try:
        loaded = definition_yaml.load(file.read_text(encoding="utf-8"), aliases=True)
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, definition_yaml.YamlProblem) as exc:
        raise ConfigError("TASKYARD_CONFIG", str(file), f"cannot be read: {exc}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict) or not isinstance(loaded.get("contexts", {}), dict):
        raise ConfigError("TASKYARD_CONFIG", str(file), "must hold `contexts:` as a mapping of names")
    return loaded


def save(environ: Mapping[str, str], config: Mapping[str, Any]) -> Path:
    """Write the file with mode 0600 (replacing it whole, so a reader never sees half of it)."""
    file = path(environ)
    file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = file.with_name(f".{file.name}.{os.getpid()}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        import yaml

        yaml.safe_dump(dict(config), out, sort_keys=False)
    os.chmod(temporary, 0o600)
    os.replace(temporary, file)
    return file


def context_values(name: str | None, environ: Mapping[str, str]) -> dict[str, str]:
    """The settings of context `name` (else TASKYARD_CONTEXT, else current-context), by variable."""
    config = load(environ)
    chosen = name or environ.get("TASKYARD_CONTEXT") or config.get("current-context")
    if not chosen:
        return {}
    contexts = config.get("contexts") or {}
    if chosen not in contexts:
        known = ", ".join(sorted(contexts)) or "none"
        raise ConfigError("context", chosen, f"is not in {path(environ)} (contexts: {known})")
    context = contexts[chosen] or {}
    return {variable: str(context[key]) for variable, key in KEYS.items() if context.get(key)}


# ---------------------------------------------------------------------------------------------------
# Command line.


def add_commands(commands: Any, connection: argparse.ArgumentParser) -> None:
    config = commands.add_parser(
        "config", help="named contexts: deployments and credentials to switch between"
    )
    actions = config.add_subparsers(dest="action", required=True, metavar="ACTION")
    setting = actions.add_parser(
        "set-context",
        parents=[connection],
        help="save a context: the connection flags given, else the TASKCLUSTER_* variables",
    )
    setting.add_argument("name", metavar="NAME")
    setting.set_defaults(handler=set_context)
    use = actions.add_parser("use-context", help="make a context the current one")
    use.add_argument("name", metavar="NAME")
    use.set_defaults(handler=use_context)
    listing = actions.add_parser("get-contexts", help="list the contexts (never their tokens)")
    listing.set_defaults(handler=get_contexts)
    delete = actions.add_parser("delete-context", help="remove a context")
    delete.add_argument("name", metavar="NAME")
    delete.set_defaults(handler=delete_context)

    signin = commands.add_parser(
        "signin",
        parents=[connection],
        help="make temporary credentials from the current ones",
        description="Make temporary credentials signed by the current credentials (which must be "
        "permanent): print them as `export` lines, or with --save-as NAME store them as context NAME "
        "and make it current.",
    )
    signin.add_argument("--expires-in", default="1d", metavar="DURATION", help="how long they last (max 31d)")
    signin.add_argument("--scope", action="append", help="a scope they carry (default: all of yours)")
    signin.add_argument("--name", help="a named temporary client (needs auth:create-client:NAME)")
    signin.add_argument("--save-as", metavar="CONTEXT", help="store them as this context and use it")
    signin.set_defaults(handler=signin_command)


def main(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    try:
        said = args.handler(args, environ)
    except ConfigError as exc:
        print(f"taskyard: {exc.message}", file=sys.stderr)
        return 2
    if said:
        print(said)
    return 0


def set_context(args: argparse.Namespace, environ: Mapping[str, str]) -> str:
    from taskyard.cli import admin

    values = {}
    for flag, variable, _ in admin.CONNECTION:
        given = getattr(args, admin._dest(flag))
        value = given if given is not None else environ.get(variable, "")
        if value:
            values[KEYS[variable]] = value
    if "rootUrl" not in values:
        raise ConfigError("TASKCLUSTER_ROOT_URL", "", "a context needs a root URL: set it or pass --root-url")
    config = load(environ)
    config.setdefault("contexts", {})[args.name] = values
    config.setdefault("current-context", args.name)
    return f"Saved context {args.name} in {save(environ, config)}."


def use_context(args: argparse.Namespace, environ: Mapping[str, str]) -> str:
    config = load(environ)
    if args.name not in (config.get("contexts") or {}):
        raise ConfigError("context", args.name, f"is not in {path(environ)}: add it with set-context")
    config["current-context"] = args.name
    save(environ, config)
    return f"Using context {args.name}."


def get_contexts(args: argparse.Namespace, environ: Mapping[str, str]) -> str:
    config = load(environ)
    current = config.get("current-context")
    rows = [
        f"{'*' if name == current else ' '} {name}  {c.get('rootUrl', '')}  {c.get('clientId', 'anonymous')}"
        + ("  (temporary)" if c.get("certificate") else "")
        for name, c in (config.get("contexts") or {}).items()
    ]
    return "\n".join(rows) or f"no contexts in {path(environ)}"


def delete_context(args: argparse.Namespace, environ: Mapping[str, str]) -> str:
    config = load(environ)
    if (config.get("contexts") or {}).pop(args.name, None) is None:
        return f"No context {args.name}."
    if config.get("current-context") == args.name:
        config.pop("current-context")
    save(environ, config)
    return f"Deleted context {args.name}."


def signin_command(args: argparse.Namespace, environ: Mapping[str, str]) -> str:
    from taskyard.cli import admin

    connection = admin.connection(args, environ)
    if not connection.client_id:
        raise ConfigError("TASKCLUSTER_CLIENT_ID", "", "signin signs with your credentials: set them first")
    if connection.certificate:
        raise ConfigError("TASKCLUSTER_CERTIFICATE", "...", "temporary credentials cannot make more")
    try:
        lasts = admin.duration(args.expires_in)
    except argparse.ArgumentTypeError as exc:
        raise ConfigError("--expires-in", args.expires_in, str(exc)) from None
    scopes = args.scope or _current_scopes(connection)
    now = dates.now_ms()
    start, expiry = now - 5 * dates.MINUTE, now + lasts  # slack for clocks that differ a little
    try:
        made = hawk.temporary_credentials(
            connection.client_id, connection.access_token, scopes, start, expiry, args.name
        )
    except ValueError as exc:
        raise ConfigError("--expires-in", args.expires_in, str(exc)) from None
    if args.save_as:
        config = load(environ)
        config.setdefault("contexts", {})[args.save_as] = {
            "rootUrl": connection.root_url,
            "clientId": made["clientId"],
            "accessToken": made["accessToken"],
            "certificate": made["certificate"],
        }
        config["current-context"] = args.save_as
        file = save(environ, config)
        said = f"Saved temporary credentials for {made['clientId']} as context {args.save_as} in {file}"
        return f"{said}, until {dates.to_iso(expiry)}."
    return "\n".join(
        f"export {variable}='{value}'"
        for variable, value in (
            ("TASKCLUSTER_ROOT_URL", connection.root_url),
            ("TASKCLUSTER_CLIENT_ID", made["clientId"]),
            ("TASKCLUSTER_ACCESS_TOKEN", made["accessToken"]),
            ("TASKCLUSTER_CERTIFICATE", made["certificate"]),
        )
    )


def _current_scopes(connection: http.Connection) -> list[str]:
    """currentScopes: what the credentials hold (it fails here, with the reason, if they are wrong)."""
    from taskyard.model.client_errors import Refused

    try:
        return list(http.call(connection, "GET", "/scopes/current")["scopes"])
    except Refused as exc:
        raise ConfigError(
            "credentials", connection.client_id, f"were refused: {exc.message.splitlines()[0]}"
        ) from None

"""`taskyard notify`: the deployment's notify service from the command line.

`notify test --email ADDRESS` sends a test email through the deployment's SMTP server (the API's
`email`), to check `--smtp-url`. Like `taskyard task`, it talks HTTP to TASKCLUSTER_ROOT_URL with
the TASKCLUSTER_* credentials (scope `notify:email:<address>`). Exit status: 0 sent (or
suppressed as a duplicate), 1 the server refused (no SMTP server configured) or could not be
reached, 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import socket
import urllib.request

from taskyard.cli import admin, http
from taskyard.cli.tasks import Result

COMMANDS = ("notify",)


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `notify test` on `taskyard`'s sub-commands."""
    common = admin._common_options()
    notify = commands.add_parser("notify", help="send notifications through the notify service")
    actions = notify.add_subparsers(dest="action", required=True, metavar="ACTION")
    test = actions.add_parser("test", parents=[common], help="send a test email, to check --smtp-url")
    test.add_argument("--email", required=True, metavar="ADDRESS", help="where the test email goes")
    test.set_defaults(handler=send_test)


def send_test(connection: http.Connection, args: argparse.Namespace) -> Result:
    body = {
        "address": args.email,
        "subject": "taskyard test email",
        "content": f"A test email from taskyard's notify service, sent by `taskyard notify test` on "
        f"{socket.gethostname()}. Email notifications work.",
    }
    data = json.dumps(body).encode()
    request = urllib.request.Request(connection.url("notify", "/email", None), data=data, method="POST")
    request.add_header("Content-Type", "application/json")
    http.sign(request, connection, data)
    with http.translated(request), urllib.request.urlopen(request, timeout=connection.timeout) as response:
        sent = response.status == 200
    text = (
        f"sent a test email to {args.email}"
        if sent
        else f"not sent to {args.email}: a duplicate of a recent one"
    )
    return Result({"address": args.email, "sent": sent}, text)
